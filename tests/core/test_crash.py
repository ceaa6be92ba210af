"""Systematic crash injection (DESIGN.md invariant 3) and damaged metadata.

For each write operation we first count its storage operations (K) on a copy
of a small table with some history, then, on a fresh copy each time, make it
fail at every operation n in 1..K+1, in three ways:

- ``crash``: operation n fails before it happens, and so does every later one
  (the process died just before it). Uses conftest's ``FailAt``.
- ``crash-after``: operation n happens, then the process dies (n reports an
  error, every later operation fails). At the snapshot create this is the
  "committed, but the writer never learned it" case.
- ``ack-lost``: operation n happens but reports an error, and later
  operations work (a lost acknowledgement; the process carries on).

After each run, with a fresh reader: the latest snapshot is the previous or
the new one and nothing else; whether it is the new one follows from n and the
position of the commit point (the create of ``snapshot-<id>``): hint writes
after it may fail without failing the commit. Every snapshot reads back
exactly; no file that existed before was changed (only the LATEST/EARLIEST
hints may be rewritten). Then the same call is retried and must leave the
right state; when the first attempt's snapshot is visible, the retry with the
same commit_user/commit_identifier returns that snapshot instead of
committing again (compact has no identifier: its retry finds nothing left to
compact).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import pytest

from airflow_snaptable.core import (
    CommitKind,
    CorruptMetadataError,
    Snapshot,
    SnapTableError,
    Storage,
    Table,
    TableNotFoundError,
)
from airflow_snaptable.core.native.snapshot import EARLIEST_HINT, LATEST_HINT, snapshot_path
from tests.conftest import SCHEMA, FailAt, InjectedCrash, make_rows

PARTITIONS = 3
NAMES = SCHEMA.names
USER = "writer"
OPTIONS = {"manifest.merge-min-count": "2"}  # every commit merges manifests: more metadata writes to crash in
# Local commits fsync every file; a RAM-backed directory keeps the sweeps fast.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
HINTS = {LATEST_HINT, EARLIEST_HINT}


# -- model -------------------------------------------------------------------------


def row(i: int) -> tuple:
    return (i % PARTITIONS, i, f"name-{i}", i * 0.5)


def rows_of(table) -> Counter:
    return Counter(tuple(d[c] for c in NAMES) for d in table.to_pylist())


def ids_rows(ids) -> Counter:
    return Counter(row(i) for i in ids)


def without_partitions(state: Counter, parts) -> Counter:
    return Counter({r: n for r, n in state.items() if r[0] not in parts})


# History: (action, state after). Identifiers 1..4 of USER; the operation under test uses 5.
HISTORY: list[tuple[Callable[[Table], Snapshot], Callable[[Counter], Counter]]] = [
    (lambda t: t.append(make_rows(range(0, 9)), commit_user=USER, commit_identifier=1), lambda s: s + ids_rows(range(0, 9))),
    (lambda t: t.append(make_rows(range(9, 18)), commit_user=USER, commit_identifier=2), lambda s: s + ids_rows(range(9, 18))),
    (
        lambda t: t.overwrite(make_rows([100, 103]), partitions=[{"p": 1}], commit_user=USER, commit_identifier=3),
        lambda s: without_partitions(s, {1}) + ids_rows([100, 103]),
    ),
    (lambda t: t.append(make_rows(range(18, 24)), commit_user=USER, commit_identifier=4), lambda s: s + ids_rows(range(18, 24))),
]


@dataclass(frozen=True)
class Operation:
    name: str
    run: Callable[[Table], Snapshot | None]
    expect: Callable[[Counter], Counter]
    kind: CommitKind
    identifier: int | None  # None: the call has no idempotency key (compact)
    history: int = len(HISTORY)  # how many history commits the table has before the operation


OPERATIONS = [
    Operation(
        "append",
        lambda t: t.append(make_rows(range(200, 206)), commit_user=USER, commit_identifier=5),
        lambda s: s + ids_rows(range(200, 206)),
        CommitKind.APPEND,
        5,
    ),
    Operation(
        "overwrite-table",
        lambda t: t.overwrite(make_rows(range(300, 305)), commit_user=USER, commit_identifier=5),
        lambda s: ids_rows(range(300, 305)),
        CommitKind.OVERWRITE,
        5,
    ),
    Operation(
        "overwrite-partitions",
        lambda t: t.overwrite(make_rows([402, 404, 405]), partitions=[{"p": 0}, {"p": 2}], commit_user=USER, commit_identifier=5),
        lambda s: without_partitions(s, {0, 2}) + ids_rows([402, 404, 405]),
        CommitKind.OVERWRITE,
        5,
    ),
    Operation(
        "delete-partitions",
        lambda t: t.delete([{"p": 1}], commit_user=USER, commit_identifier=5),
        lambda s: without_partitions(s, {1}),
        CommitKind.DELETE,
        5,
    ),
    Operation("compact", lambda t: t.compact(min_file_num=2, commit_user=USER), lambda s: Counter(s), CommitKind.COMPACT, None),
    Operation(
        "first-append",  # the first commit of an empty table also writes the EARLIEST hint
        lambda t: t.append(make_rows(range(500, 504)), commit_user=USER, commit_identifier=1),
        lambda s: s + ids_rows(range(500, 504)),
        CommitKind.APPEND,
        1,
        history=0,
    ),
]


def history_states(count: int) -> list[Counter]:
    states = [Counter()]
    for _action, after in HISTORY[:count]:
        states.append(after(states[-1]))
    return states


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        yield tmp


_templates: dict[tuple[str, int], str] = {}


def template(workdir: str, count: int) -> str:
    """A table with the first ``count`` history commits, built once per module."""
    if (workdir, count) not in _templates:
        uri = os.path.join(workdir, f"template-{count}")
        table = Table.create(uri, SCHEMA, partition_by=["p"], options=OPTIONS)
        for action, _after in HISTORY[:count]:
            action(table)
        _templates[(workdir, count)] = uri
    return _templates[(workdir, count)]


def fresh_copy(workdir: str, count: int, name: str) -> str:
    uri = os.path.join(workdir, name)
    shutil.rmtree(uri, ignore_errors=True)
    shutil.copytree(template(workdir, count), uri)
    return uri


def file_digests(root: str) -> dict[str, str]:
    out = {}
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


# -- crash hooks -------------------------------------------------------------------------

_WRAPPED = ("read_bytes", "open_read", "write_bytes", "create_exclusive", "exists", "list_names", "list_files", "delete")


class Recorder:
    """Counting hook: remembers every (kind, path) operation."""

    def __init__(self):
        self.ops: list[tuple[str, str]] = []

    def __call__(self, kind: str, path: str) -> None:
        self.ops.append((kind, path))


class FailAfter:
    """Operation n is carried out and then reports InjectedCrash.

    ``die=True``: every later operation fails too (the process died right after n).
    ``die=False``: later operations work (only n's acknowledgement was lost).
    Installed on one Storage instance; :meth:`remove` restores it.
    """

    def __init__(self, storage: Storage, n: int, die: bool):
        self.storage, self.n, self.die = storage, n, die
        self.seen = 0
        self.armed = False
        self.fired = False
        storage.on_operation = self._hook
        for name in _WRAPPED:
            setattr(storage, name, self._wrap(getattr(storage, name)))

    def _hook(self, kind: str, path: str) -> None:
        self.seen += 1
        if self.fired and self.die:
            raise InjectedCrash(f"process already dead (operation {self.seen}: {kind} {path})")
        if self.seen == self.n:
            self.armed = True
            self.what = f"{kind} {path}"

    def _wrap(self, original):
        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            if self.armed:
                self.armed, self.fired = False, True
                if hasattr(result, "close"):
                    result.close()
                raise InjectedCrash(f"injected failure after operation {self.n} ({self.what}) was carried out")
            return result

        return wrapper

    def remove(self) -> None:
        self.storage.on_operation = None
        for name in _WRAPPED:
            delattr(self.storage, name)


MODES = ("crash", "crash-after", "ack-lost")


def expected_outcome(mode: str, n: int, commit_point: int) -> tuple[bool, bool]:
    """(the call raises, the new snapshot is visible) for a failure at operation n."""
    if mode == "crash":  # n and everything after it never happens
        return n <= commit_point, n > commit_point
    if mode == "crash-after":  # n happens, then the process is dead
        return n <= commit_point, n >= commit_point
    return n < commit_point, n >= commit_point  # ack-lost: only n's answer is lost


# -- checks -------------------------------------------------------------------------


def check_table(uri: str, states: list[Counter], latest: int, op: Operation | None = None) -> Table:
    """A fresh reader sees snapshots 1..latest, each exactly as ``states`` says."""
    table = Table.open(uri)
    head = table.latest_snapshot()
    assert (head.id if head else 0) == latest
    assert [s.id for s in table.snapshots()] == list(range(1, latest + 1))
    if latest:
        assert table.earliest_snapshot().id == 1
    for i in range(1, latest + 1):
        snapshot = table.snapshot(i)
        assert rows_of(table.scan(snapshot_id=i).to_arrow()) == states[i], f"snapshot {i} reads wrong rows"
        assert snapshot.total_record_count == sum(states[i].values())
    assert rows_of(table.scan().to_arrow()) == states[latest]
    if op is not None and latest == len(states) - 1 and latest > op.history:
        new = table.snapshot(latest)
        assert new.commit_kind is op.kind and new.commit_user == USER and new.commit_identifier == op.identifier
    return table


def count_operations(workdir: str, op: Operation) -> tuple[list[tuple[str, str]], int]:
    uri = fresh_copy(workdir, op.history, f"{op.name}-count")
    table = Table.open(uri)
    recorder = Recorder()
    table.storage.on_operation = recorder
    result = op.run(table)
    assert result is not None and result.id == op.history + 1
    commit_point = recorder.ops.index(("write", snapshot_path(op.history + 1))) + 1
    return recorder.ops, commit_point


def crash_points(mode: str, ops: list[tuple[str, str]]) -> list[int]:
    """Every n for ``crash``; for the others only operations that change storage (a failure right
    after a read is the same as a crash before the next operation)."""
    if mode == "crash":
        return list(range(1, len(ops) + 2))
    return [i + 1 for i, (kind, _path) in enumerate(ops) if kind in ("write", "delete")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", OPERATIONS, ids=[o.name for o in OPERATIONS])
def test_crash_at_every_operation(workdir, op: Operation, mode: str):
    ops, commit_point = count_operations(workdir, op)
    # After the commit point come only the hints and read-only checks (does the snapshot extend the table:
    # no rollback fence, its predecessor is its parent?); failures there do not fail the call.
    assert ops[commit_point:] and all(
        path in HINTS or (kind in ("exists", "list", "read") and path.startswith(("snapshot", "plan")))
        for kind, path in ops[commit_point:]
    ), (
        f"only hint writes and read-only checks may follow the commit point: {ops[commit_point:]}"
    )
    previous = op.history
    states = history_states(previous)
    states.append(op.expect(states[-1]))
    before = file_digests(template(workdir, previous))

    for n in crash_points(mode, ops):
        where = f"{op.name}, {mode} at operation {n}/{len(ops)} ({ops[n - 1] if n <= len(ops) else 'none'})"
        uri = fresh_copy(workdir, previous, f"{op.name}-{mode}")
        table = Table.open(uri)
        hook = None
        if mode == "crash":
            table.storage.on_operation = FailAt(n)
        else:
            hook = FailAfter(table.storage, n, die=(mode == "crash-after"))

        raised = False
        try:
            result = op.run(table)
        except InjectedCrash:
            raised = True
        should_raise, should_be_visible = expected_outcome(mode, n, commit_point)
        if n > len(ops):
            should_raise, should_be_visible = False, True
        assert raised == should_raise, f"{where}: raised={raised}, expected {should_raise}"
        if not raised:
            assert result is not None and result.id == previous + 1, f"{where}: returned {result}"

        # (a) + (b): a fresh reader sees the previous or the new state, every snapshot readable.
        latest = previous + 1 if should_be_visible else previous
        try:
            check_table(uri, states, latest, op)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from exc
        after = file_digests(uri)
        changed = [p for p, digest in before.items() if after.get(p) != digest and p not in HINTS]
        assert not changed, f"{where}: files that existed before were changed or removed: {changed}"

        # (c) + (d): the same call again finishes the job, exactly once.
        if mode == "ack-lost":
            hook.remove()
            retry_table = table  # the process carried on: retry on the same instance
        else:
            retry_table = Table.open(uri)
        again = op.run(retry_table)
        if should_be_visible:
            if op.identifier is not None:
                assert again is not None and again == retry_table.snapshot(previous + 1), (
                    f"{where}: the retry did not return the snapshot its first attempt committed"
                )
            else:
                assert again is None, f"{where}: compact retried after it committed should find nothing to do"
        else:
            assert again is not None and again.id == previous + 1, f"{where}: retry made {again}"
        try:
            check_table(uri, states, previous + 1, op)
        except AssertionError as exc:
            raise AssertionError(f"{where}, after the retry: {exc}") from exc


# -- Table.create ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["crash", "crash-after"])
def test_crash_in_table_create(workdir, mode):
    uri = os.path.join(workdir, f"create-count-{mode}")
    shutil.rmtree(uri, ignore_errors=True)
    storage = Storage.from_uri(uri)
    recorder = Recorder()
    storage.on_operation = recorder
    Table.create(uri, SCHEMA, partition_by=["p"], storage=storage)
    k = len(recorder.ops)
    assert k >= 1

    outcomes = []
    points = range(1, k + 2) if mode == "crash" else [i + 1 for i, (kind, _p) in enumerate(recorder.ops) if kind == "write"]
    for n in points:
        where = f"Table.create, {mode} at operation {n}/{k}"
        uri = os.path.join(workdir, f"create-{mode}-{n}")
        storage = Storage.from_uri(uri)
        if mode == "crash":
            storage.on_operation = FailAt(n)
        else:
            FailAfter(storage, n, die=True)
        try:
            Table.create(uri, SCHEMA, partition_by=["p"], options=OPTIONS, storage=storage)
            crashed = False
        except InjectedCrash:
            crashed = True
        assert crashed == (n <= k), where
        try:
            table = Table.open(uri)
            outcomes.append("table")
        except TableNotFoundError:
            outcomes.append("none")
            assert not Table.exists(uri), where
            table = Table.create(uri, SCHEMA, partition_by=["p"], options=OPTIONS)
        # Either way: an empty, working table.
        assert table.latest_snapshot() is None, where
        assert table.scan().to_arrow().num_rows == 0, where
        assert table.partition_keys == ("p",), where
        table.append(make_rows(range(6)), commit_user=USER, commit_identifier=1)
        assert rows_of(Table.open(uri).scan().to_arrow()) == ids_rows(range(6)), where
    if mode == "crash":
        assert outcomes[-1] == "table" and "none" in outcomes
    else:
        assert outcomes[-1] == "table"  # the schema create happened, then the process died


# A process killed *inside* a local create_exclusive / write_bytes (after the temp file is written, before
# link()/replace()) leaves ".<name>.<hex>.tmp" beside the target; the injected crashes above fire before an
# operation starts, so these leftovers are planted by hand.


def _plant_temp(uri: str, rel_dir: str, target: str, data: bytes = b'{"partial') -> None:
    os.makedirs(os.path.join(uri, rel_dir), exist_ok=True)
    write_raw(uri, f"{rel_dir}/.{target}.0123456789abcdef0123456789abcdef.tmp", data)


def test_temp_files_left_by_killed_writers_are_ignored(workdir):
    uri, states = history_table(workdir, "stray-temp-files")
    _plant_temp(uri, "snapshot", "snapshot-5")
    _plant_temp(uri, "snapshot", "LATEST", b"77")
    _plant_temp(uri, "schema", "schema-1")
    _plant_temp(uri, "manifest", "manifest-list-deadbeef")
    _plant_temp(uri, "data/p=0", "data-deadbeef.parquet")
    table = Table.open(uri)
    assert table.latest_snapshot().id == 4
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4]
    assert rows_of(table.scan().to_arrow()) == states[4]
    assert table.append(make_rows([950]), commit_user=USER, commit_identifier=5).id == 5
    assert rows_of(Table.open(uri).scan().to_arrow()) == states[4] + ids_rows([950])


def test_create_after_create_killed_mid_write(workdir):
    uri = os.path.join(workdir, "create-killed-mid-write")
    shutil.rmtree(uri, ignore_errors=True)
    _plant_temp(uri, "schema", "schema-0")
    assert not Table.exists(uri)
    with pytest.raises(TableNotFoundError):
        Table.open(uri)
    table = Table.create(uri, SCHEMA, partition_by=["p"])  # raises TableAlreadyExistsError
    assert table.latest_snapshot() is None


# -- damaged hints and metadata -----------------------------------------------------------


def history_table(workdir: str, name: str, commits: int = len(HISTORY)) -> tuple[str, list[Counter]]:
    return fresh_copy(workdir, commits, name), history_states(commits)


def write_raw(uri: str, rel: str, data: bytes) -> None:
    with open(os.path.join(uri, rel), "wb") as f:
        f.write(data)


LATEST_HINT_DAMAGE = {
    "garbage-bytes": b"\x00\xff\xfe\x80garbage",
    "empty": b"",
    "text": b"latest",
    "negative": b"-3",
    "zero": b"0",
    "float": b"4.0",
    "too-low": b"2",
    "one": b"1",
    "whitespace": b"  4 \n",
    "one-too-high": b"5",
    "too-high": b"99",
    "huge": b"99999999999999999999999999",
}


@pytest.mark.parametrize("damage", LATEST_HINT_DAMAGE, ids=list(LATEST_HINT_DAMAGE))
def test_damaged_latest_hint_readers_and_commits(workdir, damage):
    uri, states = history_table(workdir, f"latest-{damage}")
    write_raw(uri, LATEST_HINT, LATEST_HINT_DAMAGE[damage])
    table = Table.open(uri)
    assert table.latest_snapshot().id == 4
    assert rows_of(table.scan().to_arrow()) == states[4]
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4]
    for i in range(1, 5):
        assert rows_of(table.scan(snapshot_id=i).to_arrow()) == states[i]
    # A commit still gets the next id and repairs the hint.
    snapshot = table.append(make_rows([600, 601]), commit_user=USER, commit_identifier=5)
    assert snapshot.id == 5 and snapshot.parent_id == 4
    reader = Table.open(uri)
    assert reader.latest_snapshot().id == 5
    assert rows_of(reader.scan().to_arrow()) == states[4] + ids_rows([600, 601])
    assert open(os.path.join(uri, LATEST_HINT), "rb").read().strip() == b"5"


def test_missing_latest_hint(workdir):
    uri, states = history_table(workdir, "latest-missing")
    os.remove(os.path.join(uri, LATEST_HINT))
    table = Table.open(uri)
    assert table.latest_snapshot().id == 4
    assert table.append(make_rows([700]), commit_user=USER, commit_identifier=5).id == 5
    assert rows_of(Table.open(uri).scan().to_arrow()) == states[4] + ids_rows([700])


def test_latest_hint_far_behind_falls_back_to_listing(workdir):
    """A hint more than the forward-probe window behind (12 snapshots, hint says 1)."""
    uri = os.path.join(workdir, "latest-far-behind")
    shutil.rmtree(uri, ignore_errors=True)
    table = Table.create(uri, SCHEMA, partition_by=["p"], options=OPTIONS)
    for i in range(12):
        table.append(make_rows([i]), commit_user=USER, commit_identifier=i)
    write_raw(uri, LATEST_HINT, b"1")
    reader = Table.open(uri)
    assert reader.latest_snapshot().id == 12
    assert reader.snapshot_manager.latest_id() == 12
    assert sorted(reader.scan().to_arrow().column("id").to_pylist()) == list(range(12))
    # Idempotency still sees the real latest: a retry of identifier 11 is not committed again.
    assert reader.append(make_rows([99]), commit_user=USER, commit_identifier=11).id == 12
    assert reader.append(make_rows([12]), commit_user=USER, commit_identifier=12).id == 13


EARLIEST_HINT_DAMAGE = {
    "garbage-bytes": b"\xff\xfe\x00",
    "empty": b"",
    "zero": b"0",
    "negative": b"-1",
    "too-high": b"3",
    "past-latest": b"99",
}


@pytest.mark.parametrize("damage", EARLIEST_HINT_DAMAGE, ids=list(EARLIEST_HINT_DAMAGE))
def test_damaged_earliest_hint(workdir, damage):
    uri, states = history_table(workdir, f"earliest-{damage}")
    write_raw(uri, EARLIEST_HINT, EARLIEST_HINT_DAMAGE[damage])
    table = Table.open(uri)
    assert table.earliest_snapshot().id == 1
    assert table.snapshot_manager.earliest_id() == 1
    changes = table.changes(0, 4)
    assert rows_of(changes.added_rows()) - rows_of(changes.deleted_rows()) == states[4]
    assert table.append(make_rows([800]), commit_user=USER, commit_identifier=5).id == 5
    assert table.earliest_snapshot().id == 1


# A LATEST hint above the real latest (a rollback leaves one behind; so does any damage) is accepted by
# SnapshotManager.latest_id() as long as snapshot-<hint+1> is absent: it never checks that snapshot-<hint>
# itself exists. latest_snapshot() recovers (it catches SnapshotNotFoundError and lists), but every other
# caller of latest_id() goes wrong. Reproduction: 4 snapshots, write b"99" to snapshot/LATEST.


def _too_high(workdir, name):
    uri, states = history_table(workdir, name)
    write_raw(uri, LATEST_HINT, b"99")
    return Table.open(uri), states


def test_latest_id_with_too_high_hint(workdir):
    table, _states = _too_high(workdir, "too-high-latest-id")
    assert table.snapshot_manager.latest_id() == 4  # returns 99


def test_idempotent_retry_with_too_high_hint(workdir):
    table, states = _too_high(workdir, "too-high-idempotency")
    # Identifier 4 was committed as snapshot 4: the retry must return it, not commit again.
    retry = table.append(make_rows(range(18, 24)), commit_user=USER, commit_identifier=4)
    assert retry.id == 4, f"retry committed again as snapshot {retry.id}"
    assert rows_of(Table.open(table.uri).scan().to_arrow()) == states[4]


def test_changes_to_latest_with_too_high_hint(workdir):
    table, states = _too_high(workdir, "too-high-changes")
    changes = table.changes(0)  # SnapshotNotFoundError: snapshot 5 does not exist
    assert changes.to_snapshot_id == 4
    assert rows_of(changes.added_rows()) - rows_of(changes.deleted_rows()) == states[4]


def test_stream_latest_full_with_too_high_hint(workdir):
    table, states = _too_high(workdir, "too-high-stream")
    plan = table.stream(start_mode="latest-full").next_plan()  # SnapshotNotFoundError: snapshot 99
    assert plan.snapshot_id == 4 and rows_of(table.read_files(plan.added_files)) == states[4]


def test_time_travel_with_too_high_hint(workdir):
    table, _states = _too_high(workdir, "too-high-time-travel")
    now = table.snapshot(4).time_millis + 1000
    assert table.snapshot_at(now).id == 4  # binary search over 1..99 hits missing snapshots


# -- damaged snapshot and manifest files ----------------------------------------------------


def _truncate(uri: str, rel: str, keep: float | int) -> None:
    path = os.path.join(uri, rel)
    data = open(path, "rb").read()
    size = keep if isinstance(keep, int) else int(len(data) * keep)
    write_raw(uri, rel, data[:size])


@pytest.mark.parametrize("keep", [0.5, 0.9, 1, 0], ids=["half", "most", "one-byte", "empty"])
def test_truncated_snapshot_file_raises_corrupt_metadata(workdir, keep):
    uri, states = history_table(workdir, f"truncated-snapshot-{keep}")
    _truncate(uri, snapshot_path(3), keep)
    table = Table.open(uri)
    with pytest.raises(CorruptMetadataError):
        table.snapshot(3)
    with pytest.raises(CorruptMetadataError):
        table.scan(snapshot_id=3)
    # The others are intact.
    for i in (1, 2, 4):
        assert rows_of(table.scan(snapshot_id=i).to_arrow()) == states[i]
    assert table.latest_snapshot().id == 4


def test_truncated_latest_snapshot_fails_typed_on_read_and_commit(workdir):
    uri, _states = history_table(workdir, "truncated-latest")
    _truncate(uri, snapshot_path(4), 0.5)
    table = Table.open(uri)
    with pytest.raises(CorruptMetadataError):
        table.latest_snapshot()
    with pytest.raises(CorruptMetadataError):
        table.scan()
    # A writer must not commit on top of a snapshot it cannot read, and must say why.
    with pytest.raises(CorruptMetadataError):
        table.append(make_rows([900]), commit_user=USER, commit_identifier=5)
    assert not os.path.exists(os.path.join(uri, snapshot_path(5)))


def test_snapshot_file_with_wrong_id_raises_corrupt_metadata(workdir):
    uri, _states = history_table(workdir, "snapshot-wrong-id")
    shutil.copyfile(os.path.join(uri, snapshot_path(2)), os.path.join(uri, snapshot_path(3)))
    with pytest.raises(CorruptMetadataError):
        Table.open(uri).snapshot(3)


@pytest.mark.parametrize("which", ["base-list", "delta-list", "manifest"])
def test_truncated_manifest_raises_corrupt_metadata(workdir, which):
    uri, _states = history_table(workdir, f"truncated-{which}")
    table = Table.open(uri)
    snapshot = table.snapshot(4)
    if which == "base-list":
        rel = f"manifest/{snapshot.base_manifest_list}"
    elif which == "delta-list":
        rel = f"manifest/{snapshot.delta_manifest_list}"
    else:
        rel = f"manifest/{table.manifest_io.read_list(snapshot.delta_manifest_list)[0].file_name}"
    _truncate(uri, rel, 0.5)
    with pytest.raises(CorruptMetadataError):
        Table.open(uri).scan(snapshot_id=4).to_arrow()
    assert issubclass(CorruptMetadataError, SnapTableError)


@pytest.mark.parametrize("keep", [0, 1, 0.5], ids=["empty", "one-byte", "half"])
def test_truncated_schema_file_raises_corrupt_metadata(workdir, keep):
    uri, _states = history_table(workdir, f"truncated-schema-{keep}")
    _truncate(uri, "schema/schema-0", keep)
    with pytest.raises(CorruptMetadataError):
        Table.open(uri)
