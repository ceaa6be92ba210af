"""What one commit changes, and what it was planned against (core/native/commit.py commits it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from airflow_snaptable.core.native.manifest import DataFile
from airflow_snaptable.core.native.snapshot import CommitKind, Snapshot

#: ``overwrite_scope`` value meaning "the whole table".
WHOLE_TABLE = "WHOLE_TABLE"


@dataclass
class CommitRequest:
    """What one commit changes, and what it was planned against."""

    kind: CommitKind
    added: list[DataFile]
    deleted: list[DataFile]
    base_snapshot: Snapshot | None
    commit_user: str
    commit_identifier: int | None = None
    watermark: int | None = None
    #: Partitions this commit replaces (a list of partition specs), WHOLE_TABLE, or None.
    overwrite_scope: list[dict] | str | None = None
    #: Recomputes ``deleted`` against a newer snapshot, after a concurrent COMPACT of the overwritten partitions.
    replan_deleted: Callable[[Snapshot], list[DataFile]] | None = None
    extra_summary: dict = field(default_factory=dict)
    #: Added paths chosen by the caller (commit_files): a commit after the base that touched one is a conflict.
    new_paths: frozenset[str] = frozenset()


