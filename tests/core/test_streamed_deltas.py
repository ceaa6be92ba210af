"""Expiry planning reads deltas streamed: a manifest decoded in batches gives exactly its entries,
and the native store's DeltaEntries hands each snapshot's entries out once, decoded lazily."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.manifest import DataFile, FileKind, ManifestEntry, decode_manifest, encode_manifest, iter_manifest
from airflow_snaptable.core.formats.native.files import DeltaEntries

TYPES = [pa.int64()]


def _entries(count: int, kind: FileKind = FileKind.ADD, prefix: str = "f") -> list[ManifestEntry]:
    return [ManifestEntry(kind, DataFile(f"data/p={i % 3}/{prefix}-{i}.parquet", (i % 3,), i, 10 * i)) for i in range(count)]


@pytest.mark.parametrize("batch_rows", [1, 3, 7, 1000])
def test_batches_decode_to_the_whole_manifest(batch_rows):
    entries = _entries(10) + _entries(4, FileKind.DELETE)
    data = encode_manifest(entries)
    assert list(iter_manifest(data, TYPES, where="m", batch_rows=batch_rows)) == decode_manifest(data, TYPES, where="m") == entries


def test_an_empty_manifest_has_no_entries():
    assert list(iter_manifest(encode_manifest([]), TYPES, where="m")) == []


def test_unreadable_or_foreign_bytes_are_corruption():
    with pytest.raises(CorruptMetadataError):
        list(iter_manifest(b"not parquet", TYPES, where="m"))
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table({"other": [1, 2]}), sink)
    with pytest.raises(CorruptMetadataError, match="unexpected columns"):
        list(iter_manifest(sink.getvalue(), TYPES, where="m"))


def test_delta_entries_hand_out_each_snapshot_once_and_skip_missing_manifests():
    a, b = _entries(3, prefix="a"), _entries(2, FileKind.DELETE, prefix="b")
    contents = {"ma": encode_manifest(a), "mb": encode_manifest(b)}
    decoded = []

    def decode(name, data):
        decoded.append(name)
        return iter_manifest(data, TYPES, where=name)

    # "gone" was skipped as missing (the repair path); "ma" is listed under two snapshots.
    changes = DeltaEntries({2: ["ma", "gone"], 3: ["mb", "ma"]}, contents, decode)
    third = changes.pop(3)
    assert decoded == []  # nothing decoded before the entries are iterated
    assert list(changes.pop(2)) == a
    assert list(third) == b + a
    with pytest.raises(KeyError):
        changes.pop(2)


def _reference_candidates(table, earliest: int, end: int) -> list[tuple]:
    """The planner's rule over whole decoded deltas (what plan_expiry did before it streamed)."""
    from airflow_snaptable.core.native.manifest import FileKind as Kind

    data: dict[str, tuple] = {}
    readded: set[str] = set()
    for snapshot_id in range(earliest + 1, end + 1):
        entries = table.manifest_io.read_delta(table.snapshot(snapshot_id))
        added_here = {e.file.path for e in entries if e.kind is Kind.ADD}
        for path in added_here:
            if data.pop(path, None) is not None:
                readded.add(path)
        for entry in entries:
            if entry.kind is Kind.DELETE and entry.file.path not in added_here:
                data[entry.file.path] = (entry.file.path, entry.file.file_size, snapshot_id, None, entry.file.path in readded)
    return sorted(data.values())


@pytest.mark.parametrize("seed", range(6))
def test_streamed_planning_plans_exactly_what_whole_deltas_give(tmp_path, seed, monkeypatch):
    """Appends, partition overwrites, full overwrites, compactions and re-adds in a random order; every
    prefix range is planned with deltas decoded in tiny batches and compared with the rule applied
    to whole decoded deltas."""
    import random

    from airflow_snaptable.core import Table
    from airflow_snaptable.core.formats.native import files as native_files
    from airflow_snaptable.core.lifecycle.expiry.plan import plan_expiry
    from tests.conftest import SCHEMA, make_rows

    rng = random.Random(seed)
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    next_id = 0
    for _ in range(12):
        ids = list(range(next_id, next_id + rng.randint(1, 6)))
        next_id += len(ids)
        action = rng.choice(["append", "append", "partition", "all", "compact", "readd"])
        if action == "readd" and table.latest_snapshot() is not None and table.latest_snapshot().id > 2:
            # A keep-history rollback adds back files later commits deleted: the re-add rule.
            table.rollback_to(rng.randint(1, table.latest_snapshot().id - 1), keep_history=True)
        elif action in ("append", "readd") or table.latest_snapshot() is None:
            table.append(make_rows(ids))
        elif action == "partition":
            ids = [i for i in ids if i % 3 == ids[0] % 3]  # rows of that one partition only
            table.overwrite(make_rows(ids), partitions=[{"p": ids[0] % 3}])
        elif action == "all":
            table.overwrite(make_rows(ids))
        elif table.compact(min_file_num=2) is None:
            table.append(make_rows(ids))
    latest = table.latest_snapshot().id
    real = native_files.iter_manifest
    monkeypatch.setattr(native_files, "iter_manifest", lambda data, types, where: real(data, types, where, batch_rows=2))
    planned = 0
    for end in range(2, latest + 1):
        plan = plan_expiry(table.store, 1, end)
        got = [(c.path, c.size, c.below, c.from_id, c.readded) for c in plan.data_files]
        assert got == _reference_candidates(table, 1, end)
        planned += len(got)
    assert planned, "no range had a candidate: the history deleted nothing"
