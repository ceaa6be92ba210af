"""Paimon's changelog files: a snapshot's ``changelogManifestList`` and the changelog files it lists.

A table with a ``changelog-producer`` writes, with each commit, a changelog manifest list (in
``manifest/``, the same Avro lists as the base and delta lists) naming manifests whose ADD
entries are changelog files (``changelog-<uuid>-<n>``) in the buckets' directories. Only that
commit writes them, and only streaming reads of that snapshot read them: they are the snapshot's
own (files.py counts them with its metadata).

Coupled changelog (Paimon's ``ExpireSnapshotsImpl`` when ``changelogDecoupled`` is false):
expiring a snapshot deletes its changelog files (``deleteAddedDataFiles(changelogManifestList)``)
and its changelog list and manifests (``cleanUnusedManifests``), whatever tags say: a tag keeps
its snapshot's data files but not its changelog (``manifestSkippingSet`` leaves changelog lists
out). Rollback deletes the discarded snapshots' changelog the same way (``RollbackHelper``).

Decoupled changelog (kept longer than snapshots, ``changelog/changelog-<id>`` written at expiry):
``changelogDecoupled`` is Paimon's ``ExpireConfig`` rule, each changelog option falling back to
its snapshot option (``CoreOptions.changelogNumRetainMin`` ...). Not supported yet: refused.
"""

from __future__ import annotations

from datetime import timedelta

from airflow_snaptable.core.arguments.table_options import parse_duration
from airflow_snaptable.core.errors import InvalidOptionError, UnsupportedMetadataError

#: Paimon's snapshot retention defaults (CoreOptions): the changelog options default to these.
SNAPSHOT_NUM_RETAINED_MIN = 10
SNAPSHOT_NUM_RETAINED_MAX = 2**31 - 1  # Integer.MAX_VALUE
SNAPSHOT_TIME_RETAINED = timedelta(hours=1)
#: (changelog option, snapshot option it falls back to, Paimon's default of that).
_PAIRS = (
    ("changelog.num-retained.min", "snapshot.num-retained.min", SNAPSHOT_NUM_RETAINED_MIN),
    ("changelog.num-retained.max", "snapshot.num-retained.max", SNAPSHOT_NUM_RETAINED_MAX),
    ("changelog.time-retained", "snapshot.time-retained", SNAPSHOT_TIME_RETAINED),
)


def _value(raw, key: str, default, where: str):
    if raw is None:
        return default
    try:
        if isinstance(default, timedelta):
            return parse_duration(str(raw), key)
        return int(str(raw).strip())
    except (InvalidOptionError, ValueError) as exc:
        raise UnsupportedMetadataError(f"{where}: Paimon option {key}={raw!r} cannot be read: {exc}") from exc


def decoupled_options(options: dict, where: str) -> list[str]:
    """The changelog options that keep the changelog longer than the snapshots (Paimon's
    ``changelogDecoupled``: any changelog bound above its snapshot bound); empty when coupled."""
    found = []
    for changelog_key, snapshot_key, default in _PAIRS:
        snapshot_bound = _value(options.get(snapshot_key), snapshot_key, default, where)
        changelog_bound = _value(options.get(changelog_key), changelog_key, snapshot_bound, where)
        if changelog_bound > snapshot_bound:
            found.append(f"{changelog_key}={options.get(changelog_key)} > {snapshot_key}={options.get(snapshot_key, 'default')}")
    return found


def check_changelog_options(options: dict, where: str) -> None:
    """Refuse a table whose changelog is decoupled from its snapshots (its lifecycle is not supported yet)."""
    decoupled = decoupled_options(options, where)
    if decoupled:
        raise UnsupportedMetadataError(
            f"{where}: a decoupled changelog (kept longer than the snapshots: {', '.join(decoupled)}) is not supported;"
            " only a changelog expired with its snapshots is"
        )
