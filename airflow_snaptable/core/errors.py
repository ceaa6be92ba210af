"""Every error the table format raises on purpose.

All derive from :class:`SnapTableError`, so callers (operators, the CLI, the
Spark job) can catch one type and still tell the cases apart.
"""

from __future__ import annotations


class SnapTableError(Exception):
    """Base class of all errors raised by airflow_snaptable on purpose."""


class TableNotFoundError(SnapTableError):
    """No table (no schema file) exists at the given location."""


class TableAlreadyExistsError(SnapTableError):
    """``Table.create`` found a table already at the location."""


class SnapshotNotFoundError(SnapTableError):
    """The requested snapshot does not exist (never committed, or expired)."""


class SnapshotGapError(SnapshotNotFoundError):
    """Snapshot ids between EARLIEST and LATEST are missing, and the answer asked for may be among them.

    An interrupted rollback to an expired snapshot leaves one (it restores the target first);
    re-running it (or any expiry or rollback, which finish unfinished plans) closes it.
    """

    def __init__(self, message: str, first_missing: int | None = None, last_missing: int | None = None):
        super().__init__(message)  # only the message in args: the error unpickles (Spark, Airflow) like the others
        self.first_missing = first_missing
        self.last_missing = last_missing


class TagNotFoundError(SnapTableError):
    """The requested tag does not exist."""


class TagAlreadyExistsError(SnapTableError):
    """A tag with that name exists already."""


class ConsumerNotFoundError(SnapTableError):
    """The requested consumer does not exist."""


class InvalidNameError(SnapTableError, ValueError):
    """A name that becomes a path (tag, consumer) is empty, has separators, traversal or control characters."""


class InvalidOptionError(SnapTableError, ValueError):
    """A table option key is unknown or its value cannot be parsed."""


class InvalidArgumentError(SnapTableError, ValueError):
    """An argument is out of range or inconsistent with the others."""


class InvalidPolicyError(InvalidArgumentError):
    """A maintenance policy (core/lake/policy.py) names an unknown job or key, or a value of the wrong type
    or range. Raised when the policy is loaded, before any table is touched."""


class LeaseLostError(SnapTableError):
    """A maintenance run's lease on a table (core/lake/lease.py) expired or was taken over while it
    worked: it stops before its next job on that table, as another run may be working on it now."""


class CatalogPropertyError(InvalidArgumentError):
    """An Iceberg table's catalog property (named in the message) is wrong: a ``uri`` that is no database
    URL, names an unknown driver or a database that cannot be opened; a ``py-io-impl`` or
    ``py-catalog-impl`` that names no FileIO or catalog class. Raised before anything changes."""


class SchemaMismatchError(SnapTableError, ValueError):
    """Data written to a table does not match the table's schema."""


class CommitConflictError(SnapTableError):
    """A concurrent commit changed what this commit depends on; retrying the same commit cannot succeed."""


class CommitFailedError(SnapTableError):
    """The commit could not be made after all retries (e.g. lost every race)."""


class ClockSkewError(CommitFailedError):
    """The latest snapshot is stamped further ahead of this writer's clock than ``commit.max-clock-skew``."""


class CorruptMetadataError(SnapTableError):
    """A metadata file (snapshot, manifest, schema, hint, tag) exists but cannot be parsed."""


class MissingMetadataError(CorruptMetadataError):
    """A metadata file that live metadata references (a manifest or manifest list) does not exist."""


class UnsupportedMetadataError(CorruptMetadataError):
    """Metadata a table store reads but does not understand (a format version or feature it does not
    implement). The lifecycle fails closed on it as on unparsable metadata: what is not understood may
    be what keeps a file in use."""


class PathOutsideTableError(UnsupportedMetadataError):
    """Metadata names a file outside the table's root or location: an absolute path, ``..`` above the
    root, another store or bucket, or a location outside the table's (Iceberg's ``write.data.path``).
    Nothing is deleted there: what the lifecycle cannot place inside the table is not its to delete."""


class ExecutionEnvironmentError(SnapTableError):
    """Where an action runs cannot run it: a Spark master that does not answer, executors that lack
    this package or a module it needs, run another Python or another version of the package, or an
    archive to ship that does not exist. The message names what was found and the way out."""


class StorageError(SnapTableError):
    """The storage failed in a way the table format cannot interpret (not a plain 'not found')."""


class UnsupportedStorageError(SnapTableError):
    """The storage cannot give the atomic create-if-absent that commits rely on."""


class StreamPositionLostError(SnapTableError):
    """A stream's next snapshot no longer exists (expired or rolled back): continuing would skip data."""


class UnsupportedOperationError(SnapTableError):
    """An operation this table's format does not support here (e.g. writing rows into a table another
    engine writes). Raised before anything changes."""


class ProtectedSnapshotError(InvalidArgumentError):
    """A snapshot that must not expire was named for expiry: the latest, or one a consumer holds."""


class RunNotFoundError(SnapTableError):
    """No noncurrent run (core/lifecycle/noncurrent/) of that id is recorded on the table: never run with
    ``noncurrent_days``, already purged, or the id is mistyped."""


class UndoRefusedError(SnapTableError):
    """Undoing a noncurrent run would not bring back what it removed exactly as it was. A refusal of the
    checks changes nothing; one met while the undo applied (or by a rerun of an interrupted undo) leaves
    what was brought back before, reading as it did. Either way the run stays recorded (its files
    noncurrent) and the refusal leaves no undo mark: deleting runs and purge go on (docs/lifecycle.md)."""


class RunPurgedError(UndoRefusedError):
    """The run's files were purged (or a purge of them has started): the snapshots and tags it removed
    cannot be readable again (invariant 1)."""


class DependentRunError(UndoRefusedError):
    """A later run depends on this one (it expired the snapshots right after this run's, or rolled back
    past them): undo that run first (its id is in the message)."""


class UndoInvariantError(UndoRefusedError):
    """Undoing the run would break an invariant of the table, named in the message (a tag name taken by
    another state, a snapshot id reused by a later commit, a history that would have a gap)."""


class UndoNameTakenError(UndoInvariantError):
    """A tag or ref name the run removed names another state now (one created before the undo, or between
    its checks and its apply): undo brings back only the very tag it removed (same snapshot, same
    content), never reports another one as restored. The new tag is left as it is; free the name (delete
    or rename that tag) and rerun the undo, or leave the run to purge."""


class UndoUnsupportedError(UndoRefusedError, UnsupportedOperationError):
    """The table's catalog cannot take what the undo must commit (an Apache Iceberg table's expired
    snapshots through a REST catalog: Iceberg's add-snapshot refuses an old snapshot). Nothing was changed."""


class DeletionInProgressError(UndoRefusedError):
    """A deleting run no deletion plan fences (consumer expiry, orphan removal, a tag deletion that frees
    nothing) is under way on the table: undo refuses (nothing changed) rather than bring back what that run
    may be about to delete. Rerun the undo after it; a crashed run's mark goes stale after 15 minutes."""


class UndoInProgressError(CommitConflictError):
    """An undo of the table is under way (or was interrupted): a deleting run does not start until it
    finished. Rerun the undo named in the message if it was interrupted, then this run."""


class DeletingMarkLapsedError(CommitConflictError):
    """A deleting run could not renew its deleting mark for half its stale time, so an undo may have taken
    it for a crashed run's and brought files back meanwhile: the run deletes nothing more. Rerun it."""


class TableNameConflictError(SnapTableError):
    """Two tables of a lake have one name (``a.b/t`` and ``a/b/t`` are both ``a.b.t``; a Paimon ``pm.db/t``
    and ``pm/t`` both ``pm.t``): neither is maintained, since a policy section naming it could be meant
    for either (core/lake/discovery.py)."""
