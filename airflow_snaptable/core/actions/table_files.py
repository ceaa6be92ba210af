"""Actions that rewrite a table's files without changing its rows: Iceberg's manifest rewriting, and what
compaction takes on each format (core/formats/iceberg/compaction.py, core/write/compaction.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_snaptable.core.actions.contract import Action, arg, check_size
from airflow_snaptable.core.errors import InvalidArgumentError, UnsupportedOperationError


def compact_arguments(table, arguments: dict[str, Any]) -> dict[str, Any]:
    """The Compact action's arguments as ``table.compact`` takes them: ``min_input_files`` (Iceberg's
    name) is ``min_file_num``; a dry run is Iceberg's (this package's compaction plans and commits in one step)."""
    arguments = dict(arguments)
    min_input_files = arguments.pop("min_input_files", None)
    if min_input_files is not None:
        if arguments.get("min_file_num") not in (None, min_input_files):
            raise InvalidArgumentError("min_input_files is Iceberg's name for min_file_num: give one")
        arguments["min_file_num"] = min_input_files
    dry_run = arguments.pop("dry_run", False)
    if getattr(table, "format", None) == "iceberg":
        arguments["dry_run"] = dry_run
    elif dry_run:
        raise UnsupportedOperationError(f"{table.uri}: a compaction dry run is supported on Iceberg tables")
    return arguments


@dataclass(frozen=True, kw_only=True)
class RewriteManifests(Action):
    """Cluster the current snapshot's manifests by partition into manifests near the target size (Iceberg tables)."""

    name: ClassVar[str] = "rewrite-manifests"

    target_manifest_size: str | int | None = arg(
        None, check=check_size,
        help="Size of the manifests written, e.g. '8 mb' (default: table property commit.manifest.target-size-bytes, 8 MB).",
    )
    dry_run: bool = arg(False, help="Say how many manifests there would be, change nothing.")

    def run(self, table) -> dict[str, Any]:
        rewrite = getattr(table, "rewrite_manifests", None)
        if rewrite is None:
            raise UnsupportedOperationError(f"{table.uri}: manifest rewriting is supported on Iceberg tables")
        return self.result_document(rewrite(**self.arguments()))
