"""Commit requirements that make a decision hold only on the metadata it was made on.

A catalog commit applies its updates to the metadata the catalog has *at commit time*, and
pyiceberg's standard requirements assert only the table's UUID, schema and spec ids and the
snapshots that named refs point at. A plan made on an older version (which snapshots an expiry
removes, which tags are past their age) would then be applied over changes it never saw: a tag
created meanwhile on a removed snapshot is dropped with it, a branch created on an old snapshot
loses the manifests it carried over, a retention setting raised meanwhile is ignored.

Java commits against its base metadata and fails on any change. The same holds here:

- catalogs that check requirements in this process (pyiceberg's SQL, Hive, Glue, DynamoDB
  catalogs: ``MetastoreCatalog``) get :class:`AssertMetadataUnchanged`, checked against the
  metadata the catalog loads inside its atomic swap;
- every catalog gets the standard requirements (every ref where it was), and a commit whose
  result shows another version in between (:func:`applied_on`) is reported, so that nothing is
  deleted on a decision that no longer holds. A REST catalog checks only the standard ones on
  its server: there a ref created between the check and the swap is not seen (docs/iceberg.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID, ValidatableTableRequirement


class AssertMetadataUnchanged(ValidatableTableRequirement):
    """The table's metadata is still the version a plan was made on: any commit in between (a ref
    created, moved or removed, a branch's retention, a property, a snapshot) fails the swap."""

    type: Literal["snaptable-assert-metadata-unchanged"] = Field(default="snaptable-assert-metadata-unchanged")
    _planned: TableMetadata = PrivateAttr()

    @classmethod
    def of(cls, metadata: TableMetadata) -> "AssertMetadataUnchanged":
        requirement = cls()
        requirement._planned = metadata
        return requirement

    def validate(self, base_metadata: TableMetadata | None) -> None:
        if base_metadata is None:
            raise CommitFailedException("Requirement failed: current table metadata is missing")
        if base_metadata != self._planned:
            raise CommitFailedException("Requirement failed: the table changed since the plan was made")


def checks_requirements_here(catalog) -> bool:
    """Does the catalog check requirements in this process (against what it swaps), not on a server?"""
    from pyiceberg.catalog import MetastoreCatalog

    return isinstance(catalog, MetastoreCatalog)


def unchanged_since(table) -> tuple:
    """Requirements that hold only while the table is the version ``table`` holds."""
    metadata = table.metadata
    requirements: tuple = (AssertTableUUID(uuid=metadata.table_uuid),)
    requirements += tuple(AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id) for name, ref in metadata.refs.items())
    if checks_requirements_here(table.catalog):
        requirements += (AssertMetadataUnchanged.of(metadata),)
    return requirements


def applied_on(table, committed_metadata) -> bool:
    """Was the commit applied right on top of the version ``table`` holds? Its metadata log ends with
    the metadata file it replaced (Iceberg's rule); a log that records nothing cannot say otherwise."""
    log = list(committed_metadata.metadata_log or [])
    return not log or log[-1].metadata_file == table.metadata_location
