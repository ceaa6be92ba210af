"""verify(): damage it must report (never raise on), and time travel across a gap in the snapshot ids.

Item numbers refer to issue 9 ("data-loss and wrong-result bugs").
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core import CorruptMetadataError, SnapTableError, Table
from airflow_snaptable.core.errors import SnapshotGapError
from tests.conftest import SCHEMA, FailAt, InjectedCrash, make_rows, sorted_ids

H = 3_600_000  # one hour in millis


def table_with_times(uri: str, times_h) -> Table:
    """One append of rows [i, i + 100] per entry of ``times_h`` (hours since the epoch)."""
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    times = iter([int(h * H) for h in times_h])
    table.clock = lambda: next(times, int(times_h[-1] * H))
    for i in range(len(times_h)):
        table.append(make_rows([i, i + 100]))
    return table


def write_raw(uri: str, rel: str, data: bytes) -> None:
    path = os.path.join(uri, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def snapshot_times(uri: str) -> dict[int, int]:
    """Snapshot id -> commit time, read from the files on disk (independent of the core's readers)."""
    found = {}
    for name in os.listdir(os.path.join(uri, "snapshot")):
        if name.startswith("snapshot-") and name[len("snapshot-"):].isdigit():
            with open(os.path.join(uri, "snapshot", name), "rb") as f:
                found[int(name[len("snapshot-"):])] = json.loads(f.read())["time_millis"]
    return dict(sorted(found.items()))


def gaps_of(ids: list[int]) -> list[tuple[int, int]]:
    return [(a + 1, b - 1) for a, b in zip(ids, ids[1:]) if b > a + 1]


# -- item 16: truncated data files, corrupt lifecycle files, a missing middle snapshot ------------------------


def test_truncated_data_file_is_reported(tmp_path):
    """issue 9 item 16: a data file whose size differs from the manifest's file_size passed verify (scans then fail)."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2])
    victim = sorted(f.path for f in table.scan(snapshot_id=1).files())[0]
    recorded = next(f.file_size for f in table.scan().files() if f.path == victim)
    with open(os.path.join(uri, victim), "r+b") as f:
        f.truncate(recorded // 2)
    result = Table.open(uri).verify()
    assert not result.ok
    assert result.size_mismatches == [
        {"path": victim, "recorded_size": recorded, "actual_size": recorded // 2, "referenced_by": "snapshot 1"}
    ]
    assert result.missing_files == [] and result.unreferenced_files == []
    assert result.to_dict()["size_mismatches"] == result.size_mismatches and result.to_dict()["ok"] is False


def test_grown_data_file_is_reported(tmp_path):
    """issue 9 item 16 (sibling): a data file with bytes appended differs from its recorded size too."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2])
    data_file = sorted(f.path for f in table.scan().files())[-1]
    recorded = next(f.file_size for f in table.scan().files() if f.path == data_file)
    with open(os.path.join(uri, data_file), "ab") as f:
        f.write(b"junk")
    result = Table.open(uri).verify()
    assert not result.ok
    assert [(m["path"], m["recorded_size"], m["actual_size"]) for m in result.size_mismatches] == [(data_file, recorded, recorded + 4)]


def test_truncated_manifest_list_is_reported_by_path_and_size(tmp_path):
    """issue 9 item 16 (sibling): a manifest list shorter than its snapshot recorded is named with both sizes, even
    though it no longer parses (the in-use pass fails on it, as before)."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2])
    snapshot = table.snapshot(2)
    list_rel = f"manifest/{snapshot.delta_manifest_list}"
    recorded_list = snapshot.written_metadata["delta_list"]
    with open(os.path.join(uri, list_rel), "r+b") as f:
        f.truncate(recorded_list - 1)
    result = Table.open(uri).verify()
    assert not result.ok
    assert result.size_mismatches == [
        {"path": list_rel, "recorded_size": recorded_list, "actual_size": recorded_list - 1, "referenced_by": "snapshot 2"}
    ]
    assert [m["referenced_by"] for m in result.missing_files] == ["metadata"]  # the parse failure, as before


CORRUPT_FILES = {
    "consumer": "consumer/consumer-reader",
    "active plan": "plan/plan-0123456789abcdef0123456789abcdef.json",
    "pending plan": "plan/pending-0123456789abcdef0123456789abcdef.json",
    "intent": "intent/intent-0123456789abcdef0123456789abcdef.json",
    "re-add entry": "readd/readd-2.json",
    "tag": "tag/tag-broken",
}


@pytest.mark.parametrize("kind", list(CORRUPT_FILES))
def test_corrupt_lifecycle_file_is_reported_and_the_rest_still_checked(tmp_path, kind):
    """issue 9 item 16: corrupt consumer / plan / intent / re-add files passed verify, and expiry then failed on them."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2, 3])
    table.create_tag("good", 2)
    rel = CORRUPT_FILES[kind]
    write_raw(uri, rel, b"{not json")
    # The failure verify must warn about (a corrupt tag fails expiry only once it expires snapshots).
    with pytest.raises(CorruptMetadataError):
        Table.open(uri).expire_snapshots(retain_min=1, time_retained="0 s", now=10 * H)
    # Damage the data too: the corrupt file must not stop the other checks.
    lost = sorted(f.path for f in table.scan().files())[0]
    os.remove(os.path.join(uri, lost))
    result = Table.open(uri).verify()
    assert not result.ok
    assert [c["path"] for c in result.corrupt_metadata] == [rel]
    assert "cannot parse" in result.corrupt_metadata[0]["error"]
    assert [m["path"] for m in result.missing_files] == [lost]
    assert result.tags == ["good"]  # the readable tags are still listed


def test_corrupt_snapshot_file_is_reported(tmp_path):
    """issue 9 item 16: an unparsable snapshot in the middle is reported with its path, and the rest is still checked."""
    uri = str(tmp_path / "t")
    table_with_times(uri, [1, 2, 3, 4])
    write_raw(uri, "snapshot/snapshot-2", b"\x00garbage")
    result = Table.open(uri).verify()
    assert not result.ok
    assert [c["path"] for c in result.corrupt_metadata] == ["snapshot/snapshot-2"]
    assert result.missing_files == [] and result.snapshot_gaps == []


def test_missing_middle_snapshot_is_reported_not_raised(tmp_path):
    """issue 9 item 16: a missing middle snapshot made verify raise SnapshotNotFoundError instead of reporting it."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2, 3, 4, 5])
    doomed = table.snapshot(3)
    os.remove(os.path.join(uri, "snapshot", "snapshot-3"))
    result = Table.open(uri).verify()
    assert not result.ok
    assert result.snapshot_gaps == [{"first_missing": 3, "last_missing": 3, "after": 2, "before": 4}]
    assert result.snapshot_ids == [1, 2, 4, 5]
    assert result.missing_files == []
    # Only the lists snapshot 3 alone referenced are left over; every data file is still referenced by 4 and 5.
    assert set(result.unreferenced_files) == {f"manifest/{doomed.base_manifest_list}", f"manifest/{doomed.delta_manifest_list}"}


def test_time_travel_across_a_missing_snapshot(tmp_path):
    """issue 9 item 16: snapshot_at / scan(as_of) across a gap answer when the gap cannot matter, else a typed error naming it."""
    uri = str(tmp_path / "t")
    table_with_times(uri, [1, 2, 3, 4, 5])
    os.remove(os.path.join(uri, "snapshot", "snapshot-3"))
    table = Table.open(uri)
    assert table.snapshot_at(int(1.5 * H)).id == 1  # snapshot 2 follows 1: the gap cannot matter
    assert table.snapshot_at(int(4.5 * H)).id == 4
    assert table.snapshot_at(10 * H).id == 5
    assert sorted_ids(table.scan(as_of=10 * H).to_arrow()) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
    assert table.snapshot_at(H - 1) is None  # before the earliest snapshot: nothing, as for an expired time
    for when in (int(2.5 * H), int(3.5 * H)):  # the state at these times may be snapshot 3's
        with pytest.raises(SnapshotGapError, match=r"snapshot 3 is missing.*re-run") as caught:
            table.scan(as_of=when)
        assert isinstance(caught.value, SnapTableError)
        assert (caught.value.first_missing, caught.value.last_missing) == (3, 3)


def test_watermark_search_across_a_missing_snapshot(tmp_path):
    """issue 9 item 16 (sibling): snapshot_at_watermark runs the same search; it answers or names the gap too."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    for i in range(5):
        table.append(make_rows([i]), watermark=10 * (i + 1))  # snapshot i + 1 has watermark 10 * (i + 1)
    os.remove(os.path.join(uri, "snapshot", "snapshot-3"))
    table = Table.open(uri)
    assert table.snapshot_at_watermark(5).id == 1
    assert table.snapshot_at_watermark(45).id == 5  # snapshot 4 (watermark 40) is below and 5 follows it
    for watermark in (25, 40):  # snapshot 3's watermark lies in [20, 40]: it may be the answer
        with pytest.raises(SnapshotGapError):
            table.snapshot_at_watermark(watermark)


# -- item 11: a rollback to an expired snapshot killed at every storage operation ------------


def _gap_template(uri: str) -> Table:
    """Snapshots 8, 9, 10 retained, snapshot 2 held only by tag "keep": rolling back to it restores 2 first."""
    table = table_with_times(uri, list(range(1, 11)))
    table.create_tag("keep", 2)
    table.create_tag("late", 9)
    table.expire_snapshots(retain_min=3, time_retained="0 s", now=100 * H)
    assert table.snapshot_manager.list_ids() == [8, 9, 10]
    return table


def test_killed_rollback_gap_is_reported_at_every_crash_point_and_a_rerun_repairs_it(tmp_path):
    """issue 9 item 11: kill -9 inside rollback_to(tag=<expired snapshot>) can leave ids [2, 8, 9, 10];
    verify() raised SnapshotNotFoundError and scan(as_of) failed with "snapshots kept expiring" until a rerun."""
    template = str(tmp_path / "template")
    _gap_template(template)
    counting = Table.open(shutil.copytree(template, str(tmp_path / "count")))
    trace = []
    counting.storage.on_operation = lambda kind, path: trace.append((kind, path))
    counting.rollback_to(tag="keep")
    gap_states = 0
    for n in range(1, len(trace) + 1):
        uri = str(tmp_path / "run")
        shutil.rmtree(uri, ignore_errors=True)
        shutil.copytree(template, uri)
        crashing = Table.open(uri)
        crashing.storage.on_operation = FailAt(n)
        with pytest.raises(InjectedCrash):
            crashing.rollback_to(tag="keep")
        times = snapshot_times(uri)
        ids = list(times)
        where = f"crash at operation {n}/{len(trace)} {trace[n - 1]}, snapshots {ids}"
        result = Table.open(uri).verify()  # must report, never raise
        expected_gaps = gaps_of(ids)
        assert [(g["first_missing"], g["last_missing"]) for g in result.snapshot_gaps] == expected_gaps, where
        if expected_gaps:
            gap_states += 1
            assert not result.ok, where
        # Time travel at every commit time and just before it: the right snapshot, or a typed error naming the gap.
        table = Table.open(uri)
        for when in sorted({t + d for t in times.values() for d in (-1, 0)} | {1000 * H}):
            at_or_before = [i for i, t in times.items() if t <= when]
            answer = at_or_before[-1] if at_or_before else None
            ambiguous = answer is not None and answer != ids[-1] and answer + 1 not in times
            if ambiguous:
                with pytest.raises(SnapshotGapError, match="re-run"):
                    table.scan(as_of=when)
            else:
                found = table.snapshot_at(when)
                assert (found and found.id) == answer, (where, when)
        # A rerun of the interrupted rollback repairs it.
        Table.open(uri).rollback_to(tag="keep")
        repaired = Table.open(uri)
        assert repaired.snapshot_manager.list_ids() == [2], where
        result = repaired.verify()
        assert result.ok and result.snapshot_gaps == [], (where, result)
        assert sorted_ids(repaired.scan(as_of=1000 * H).to_arrow()) == [0, 1, 100, 101]
    assert gap_states > 0, "no crash point left a gap: the sweep does not exercise the bug"


# -- item 14 (verify part): clock skew ----------------------------------------------------------------------------------


def test_snapshot_committed_in_the_future_is_reported(tmp_path):
    """issue 9 item 14 (verify part): a writer whose clock runs ahead stamps future commit times (later commits inherit them, as
    times never go backwards, or fail on them); verify() did not notice."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.append(make_rows([1]))  # the real clock: not reported
    skewed = int(time.time() * 1000) + 2 * H
    table.clock = lambda: skewed
    table.append(make_rows([2]))
    table.append(make_rows([3]))
    result = Table.open(uri).verify()
    assert not result.ok
    assert [f["snapshot_id"] for f in result.future_snapshots] == [2, 3]
    assert all(f["time_millis"] == skewed and f["ahead_millis"] > H for f in result.future_snapshots)
    assert result.missing_files == [] and result.unreferenced_files == []


def test_future_tolerance_is_the_commit_clock_skew_option(tmp_path):
    """issue 9 item 14 (verify part): verify tolerates what commits tolerate (``commit.max-clock-skew``)."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"commit.max-clock-skew": "3 h"})
    table.clock = lambda: int(time.time() * 1000) + 2 * H
    table.append(make_rows([1]))
    assert Table.open(uri).verify().future_snapshots == []


def test_snapshot_just_ahead_of_the_clock_is_within_tolerance(tmp_path):
    """issue 9 item 14 (verify part): a few seconds ahead (ordinary skew between hosts) is not reported."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, SCHEMA, partition_by=["p"])
    table.clock = lambda: int(time.time() * 1000) + 5_000
    table.append(make_rows([1]))
    result = Table.open(uri).verify()
    assert result.future_snapshots == [] and result.ok


# -- the CLI shows the new findings --------------------------------------------------------------------


def test_cli_verify_prints_every_kind_of_problem(tmp_path, capsys):
    """issue 9 items 11, 14 (verify part), 16: `snaptable verify` shows gaps, size mismatches, corrupt metadata and future snapshots."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2, 3, 4])
    table.clock = lambda: int(time.time() * 1000) + 2 * H
    table.append(make_rows([50]))
    victim = sorted(f.path for f in table.scan(snapshot_id=1).files())[0]
    with open(os.path.join(uri, victim), "r+b") as f:
        f.truncate(10)
    os.remove(os.path.join(uri, "snapshot", "snapshot-3"))
    write_raw(uri, "consumer/consumer-reader", b"{")
    assert main(["verify", uri]) == 1
    out = capsys.readouterr().out
    assert "PROBLEMS" in out
    assert "gap          snapshot 3 is missing (between 2 and 4)" in out
    assert f"wrong size   {victim}: recorded " in out and "found 10 bytes" in out
    assert "corrupt      consumer/consumer-reader: " in out
    assert "future       snapshot 5 committed at " in out
    assert main(["verify", uri, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["snapshot_gaps"][0]["first_missing"] == 3
    assert {"missing_files", "unreferenced_files", "snapshot_ids", "tags"} <= set(doc)


def test_consumer_file_with_an_invalid_name_is_reported(tmp_path):
    """issue 9 item 16 (sibling): a consumer file whose id is no valid name makes every consumers() read (expiry) fail."""
    uri = str(tmp_path / "t")
    table = table_with_times(uri, [1, 2, 3])
    table.update_consumer("reader", 2)
    os.rename(os.path.join(uri, "consumer", "consumer-reader"), os.path.join(uri, "consumer", "consumer- reader"))
    with pytest.raises(SnapTableError):
        Table.open(uri).expire_snapshots(retain_min=1, time_retained="0 s", now=10 * H)
    result = Table.open(uri).verify()
    assert not result.ok
    assert [c["path"] for c in result.corrupt_metadata] == ["consumer/consumer- reader"]


@pytest.mark.parametrize("rel", ["snapshot/snapshot-2", "consumer/consumer-reader", "intent/intent-0123456789abcdef.json", "tag/tag-dir"])
def test_directory_where_a_metadata_file_belongs_is_reported(tmp_path, rel):
    """issue 9 item 16 (sibling): a directory in place of a metadata file is reported, not raised."""
    uri = str(tmp_path / "t")
    table_with_times(uri, [1, 2, 3])
    path = os.path.join(uri, rel)
    if os.path.exists(path):
        os.remove(path)
    os.makedirs(os.path.join(path, "inner"))
    result = Table.open(uri).verify()
    assert not result.ok
    assert [c["path"] for c in result.corrupt_metadata] == [rel]
