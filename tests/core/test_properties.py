"""Property tests: random write histories against a reference model.

The model of a table state is a multiset (Counter) of full rows plus, per
partition, the number of data files (the data target file size is the default
128 MB, so every write puts exactly one file in each partition it touches,
which lets the model predict whether ``compact`` has anything to do).

After a random sequence of append / overwrite / delete / compact on a table
whose ``manifest.merge-min-count`` is tiny (so partial and full manifest
merges happen on almost every commit), every snapshot must read back exactly
as the model says, record counts must match, ``changes(i, j)`` must satisfy
``rows(j) == rows(i) + added - deleted`` (as signed multisets: compaction is
excluded from changes, so a deleted compacted file may hold rows that were
added inside the range), partition-filtered scans must equal the filtered
model, and streams must replay to the latest state.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_snaptable.core import CommitKind, FileKind, Table
from tests.conftest import SCHEMA, make_rows

PARTITIONS = 3  # make_rows puts id in partition id % 3
PARTITION_VALUES = [0, 1, 2, 3]  # 3 never holds data: overwrites/deletes of an empty partition
NAMES = SCHEMA.names
# Local commits fsync every file; a RAM-backed directory keeps hundreds of examples fast.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

SETTINGS = settings(
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


# -- model ---------------------------------------------------------------------


def row(i: int) -> tuple:
    return (i % PARTITIONS, i, f"name-{i}", i * 0.5)


def rows_of(table) -> Counter:
    return Counter(tuple(d[c] for c in NAMES) for d in table.to_pylist())


def model_rows(ids) -> Counter:
    return Counter(row(i) for i in ids)


class Model:
    """A table state: rows as a multiset, and data files per partition."""

    def __init__(self, rows: Counter | None = None, files: dict | None = None):
        self.rows = Counter(rows or {})
        self.files = dict(files or {})

    def copy(self) -> "Model":
        return Model(self.rows, self.files)

    def partitions_with_rows(self, ids) -> set[int]:
        return {i % PARTITIONS for i in ids}

    def append(self, ids) -> "Model":
        new = self.copy()
        new.rows.update(model_rows(ids))
        for p in self.partitions_with_rows(ids):
            new.files[p] = new.files.get(p, 0) + 1
        return new

    def overwrite(self, ids, parts) -> "Model":
        if parts is None:
            return Model(model_rows(ids), {p: 1 for p in self.partitions_with_rows(ids)})
        new = self.copy()
        new.rows = Counter({r: n for r, n in self.rows.items() if r[0] not in parts})
        new.rows.update(model_rows(ids))
        for p in parts:
            new.files.pop(p, None)
        for p in self.partitions_with_rows(ids):
            new.files[p] = 1
        return new

    def delete(self, parts) -> "Model":
        return self.overwrite([], parts)

    def compactable(self) -> bool:
        return any(n >= 2 for n in self.files.values())

    def compact(self) -> "Model":
        new = self.copy()
        new.files = {p: (1 if n >= 2 else n) for p, n in self.files.items()}
        return new

    def in_partition(self, p) -> Counter:
        return Counter({r: n for r, n in self.rows.items() if r[0] == p})


# -- strategies ------------------------------------------------------------------

ids_strategy = st.lists(st.integers(min_value=0, max_value=59), min_size=0, max_size=8)
parts_strategy = st.lists(st.sampled_from(PARTITION_VALUES), min_size=1, max_size=3, unique=True).map(sorted)

append_op = st.tuples(st.just("append"), ids_strategy)
# Rows of one partition only: one-entry delta manifests, the small ones that pile up behind a big one.
append_one_partition_op = st.tuples(st.integers(0, PARTITIONS - 1), st.lists(st.integers(0, 19), min_size=1, max_size=3)).map(
    lambda t: ("append", [i * PARTITIONS + t[0] for i in t[1]])
)
overwrite_all_op = st.tuples(st.just("overwrite"), ids_strategy, st.none())
overwrite_parts_op = st.tuples(parts_strategy, ids_strategy).map(
    lambda t: ("overwrite", [i for i in t[1] if i % PARTITIONS in t[0]], t[0])
)
delete_op = st.tuples(st.just("delete"), parts_strategy)
compact_op = st.just(("compact",))

any_op = st.one_of(
    append_op, append_op, append_one_partition_op, append_one_partition_op, overwrite_all_op, overwrite_parts_op, delete_op, compact_op
)
append_or_compact_op = st.one_of(append_op, append_op, append_one_partition_op, compact_op)

options_strategy = st.fixed_dictionaries(
    {
        "manifest.merge-min-count": st.sampled_from(["2", "3"]),
        # A manifest of one entry is ~1875 bytes and each entry adds ~40 (uuid paths do not compress),
        # so targets of 1890-2000 bytes put some manifests above and some below the target: partial merges
        # then start after a big manifest (and must keep their DELETE entries), and merged manifests
        # are split in several (target // 100 entries each).
        "manifest.target-file-size": st.sampled_from(["1 kb", "1890 b", "1910 b", "1940 b", "2000 b", "8 mb"]),
    }
)


def apply(table: Table, model: Model, op) -> tuple[Model, CommitKind | None, object]:
    """Run ``op`` on the table; return the model after it and the kind of snapshot expected (None: no commit)."""
    kind = op[0]
    if kind == "append":
        return model.append(op[1]), CommitKind.APPEND, table.append(make_rows(op[1], PARTITIONS))
    if kind == "overwrite":
        parts = op[2]
        specs = None if parts is None else [{"p": p} for p in parts]
        return model.overwrite(op[1], parts), CommitKind.OVERWRITE, table.overwrite(make_rows(op[1], PARTITIONS), partitions=specs)
    if kind == "delete":
        return model.delete(op[1]), CommitKind.DELETE, table.delete([{"p": p} for p in op[1]])
    assert kind == "compact"
    result = table.compact(min_file_num=2)
    if model.compactable():
        return model.compact(), CommitKind.COMPACT, result
    return model, None, result


def run_history(table: Table, ops) -> list[Model]:
    """Apply ops; return the model state of every snapshot (index = snapshot id; index 0 = empty table)."""
    states = [Model()]
    current = Model()
    for op in ops:
        before = table.latest_snapshot()
        current, expected_kind, result = apply(table, current, op)
        after = table.latest_snapshot()
        if expected_kind is None:
            assert result is None, f"{op}: compact committed although no partition has 2 files"
            assert (after and after.id) == (before and before.id)
            continue
        assert result is not None, f"{op}: expected a {expected_kind} snapshot, got none"
        assert result.id == len(states), f"{op}: snapshot id {result.id}, expected {len(states)}"
        assert result.commit_kind is expected_kind
        assert after.id == result.id
        states.append(current)
    return states


def signed(base: Counter, plus, minus) -> dict:
    out = Counter(base)
    out.update(plus)
    out.subtract(minus)
    return {k: v for k, v in out.items() if v != 0}


def check_snapshot(table: Table, snapshot_id: int, state: Model) -> None:
    snapshot = table.snapshot(snapshot_id)
    scan = table.scan(snapshot_id=snapshot_id)
    got = rows_of(scan.to_arrow())
    assert got == state.rows, f"snapshot {snapshot_id}: rows differ from the model"
    assert snapshot.total_record_count == sum(state.rows.values()), f"snapshot {snapshot_id}: total_record_count"
    assert len(scan.files()) == sum(state.files.values()), f"snapshot {snapshot_id}: number of live data files"
    assert sorted(r[1] for r in got.elements()) == sorted(r[1] for r in state.rows.elements())


# -- properties ----------------------------------------------------------------------


@SETTINGS
@given(ops=st.lists(any_op, min_size=3, max_size=12), options=options_strategy, data=st.data())
def test_random_history_matches_model(ops, options, data):
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        table = Table.create(f"{tmp}/t", SCHEMA, partition_by=["p"], options=options)
        states = run_history(table, ops)
        check_history(f"{tmp}/t", states, data)


# Histories built to hit the partial manifest merge that starts after a big manifest: small
# one-partition appends and deletes pile up one-entry manifests behind a merged (big) one, and the
# merge of that trailing run must keep its DELETE entries (the ADDs they cancel are in the big one).
merge_heavy_op = st.one_of(
    append_op, append_one_partition_op, append_one_partition_op, append_one_partition_op,
    st.tuples(st.just("delete"), st.sampled_from([0, 1, 2]).map(lambda p: [p])), compact_op,
)


@settings(SETTINGS, max_examples=30)
@given(
    ops=st.lists(merge_heavy_op, min_size=4, max_size=12),
    options=st.fixed_dictionaries(
        {
            "manifest.merge-min-count": st.sampled_from(["2", "3"]),
            "manifest.target-file-size": st.sampled_from(["2990 b", "3030 b", "3060 b", "3100 b", "3200 b"])  # around 1- to 3-entry manifests (~2980-3090 b with statistics),
        }
    ),
    data=st.data(),
)
def test_manifest_merge_heavy_history_matches_model(ops, options, data):
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        table = Table.create(f"{tmp}/t", SCHEMA, partition_by=["p"], options=options)
        states = run_history(table, ops)
        check_history(f"{tmp}/t", states, data)


def check_history(uri: str, states: list[Model], data) -> None:
    """Every snapshot, change range, filtered scan and stream of the table at ``uri`` against ``states``."""
    n = len(states) - 1
    # A fresh reader (no manifest cache) sees the same history.
    table = Table.open(uri)
    assert [s.id for s in table.snapshots()] == list(range(1, n + 1))
    if n == 0:
        assert table.latest_snapshot() is None
        assert table.scan().to_arrow().num_rows == 0
        return
    assert table.latest_snapshot().id == n
    assert table.earliest_snapshot().id == 1

    # Every snapshot reads back exactly as the model.
    for i in range(1, n + 1):
        check_snapshot(table, i, states[i])
        previous = table.snapshot(i)
        assert previous.delta_record_count == sum(states[i].rows.values()) - sum(states[i - 1].rows.values())
        assert previous.parent_id == (i - 1 or None)
    assert rows_of(table.scan().to_arrow()) == states[n].rows

    # changes(i, j): rows(j) == rows(i) + added - deleted, as signed multisets.
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, n), st.integers(0, n)).map(sorted), min_size=1, max_size=5),
        label="change ranges",
    )
    pairs.append([0, n])
    for i, j in pairs:
        changes = table.changes(i, j)
        assert changes.snapshot_ids == list(range(i + 1, j + 1))
        added = rows_of(changes.added_rows())
        deleted = rows_of(changes.deleted_rows())
        assert sum(added.values()) == changes.added_record_count
        assert sum(deleted.values()) == changes.deleted_record_count
        net = signed(states[i].rows, added, deleted)
        assert all(v > 0 for v in net.values()), f"changes({i}, {j}) deletes rows that were never there"
        assert net == dict(states[j].rows), f"changes({i}, {j}): rows(i) + added - deleted != rows(j)"
        # Compactions are left out: none of their rewritten files shows up as added, none of the files they
        # replaced as deleted (an incremental reader never sees the same row twice).
        compact_entries = [
            e for s_id in range(i + 1, j + 1) if table.snapshot(s_id).commit_kind is CommitKind.COMPACT
            for e in table.manifest_io.read_delta(table.snapshot(s_id))
        ]
        assert not {e.file.path for e in compact_entries if e.kind is FileKind.ADD} & {f.path for f in changes.added_files}
        assert not {e.file.path for e in compact_entries if e.kind is FileKind.DELETE} & {f.path for f in changes.deleted_files}
        if CommitKind.COMPACT.value not in changes.commit_kinds:
            # Without a compaction in the range the change set is exact at file level too.
            files_i = {f.path for f in table.scan(snapshot_id=i).files()} if i else set()
            files_j = {f.path for f in table.scan(snapshot_id=j).files()} if j else set()
            assert {f.path for f in changes.deleted_files} == files_i - files_j
            assert {f.path for f in changes.added_files} == files_j - files_i
    if n >= 1:
        assert signed(Counter(), rows_of(table.changes(0).added_rows()), rows_of(table.changes(0).deleted_rows())) == dict(
            states[n].rows
        )

    # Partition-filtered scans equal the filtered model (including a partition that never has rows).
    for _ in range(2):
        i = data.draw(st.integers(1, n), label="filtered snapshot")
        p = data.draw(st.sampled_from(PARTITION_VALUES), label="filtered partition")
        scan = table.scan(snapshot_id=i, filter=[("p", "=", p)])
        assert rows_of(scan.to_arrow()) == states[i].in_partition(p)
        assert all(f.partition == (p,) for f in scan.files())
        projected = table.scan(snapshot_id=i, filter=[("p", "in", [p, (p + 1) % 4])], columns=["id"]).to_arrow()
        expected_ids = sorted(r[1] for r in states[i].rows.elements() if r[0] in (p, (p + 1) % 4))
        assert projected.column_names == ["id"]
        assert sorted(projected.column("id").to_pylist()) == expected_ids

    # A stream from a full snapshot, including overwrites, replays to the latest state.
    k = data.draw(st.integers(1, n), label="stream start")
    stream = table.stream(start_mode="from-snapshot-full", snapshot_id=k, include_overwrite=True)
    plans = list(stream)
    assert plans[0].full and plans[0].snapshot_id == k
    assert rows_of(stream.read(plans[0])) == states[k].rows
    kinds = {s.id: s.commit_kind for s in table.snapshots()}
    assert [p.snapshot_id for p in plans[1:]] == [s for s in range(k + 1, n + 1) if kinds[s] is not CommitKind.COMPACT]
    replayed = Counter(states[k].rows)
    for plan in plans[1:]:
        replayed.update(rows_of(table.read_files(plan.added_files)))
        replayed.subtract(rows_of(table.read_files(plan.deleted_files)))
    assert {r: c for r, c in replayed.items() if c} == dict(states[n].rows)
    assert stream.checkpoint() == n + 1


@settings(SETTINGS, max_examples=40)
@given(ops=st.lists(append_or_compact_op, min_size=1, max_size=12), options=options_strategy, data=st.data())
def test_stream_from_snapshot_full_replays_append_only_history(ops, options, data):
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        table = Table.create(f"{tmp}/t", SCHEMA, partition_by=["p"], options=options)
        states = run_history(table, ops)
        n = len(states) - 1
        if n == 0:
            return
        for k in sorted(set(data.draw(st.lists(st.integers(1, n), min_size=1, max_size=3), label="starts"))):
            stream = table.stream(start_mode="from-snapshot-full", snapshot_id=k)
            got = Counter()
            plans = list(stream)
            assert plans and plans[0].full and plans[0].snapshot_id == k
            for plan in plans:
                assert not plan.deleted_files, "an append-only history streams no deletions"
                if not plan.full:
                    assert plan.commit_kind != CommitKind.COMPACT.value, "compactions are not streamed"
                got.update(rows_of(stream.read(plan)))
            assert got == states[n].rows, f"stream from-snapshot-full {k} does not reproduce the latest state"
            assert stream.next_plan() is None
            # New commits after the stream caught up arrive as one plan each.
            table.append(make_rows([1000 + k], PARTITIONS))
            plan = stream.next_plan()
            assert plan is not None and not plan.full
            assert rows_of(stream.read(plan)) == model_rows([1000 + k])
            states.append(states[-1].append([1000 + k]))
            n += 1


# Operations for the idempotency property: ("new", user) commits the user's next identifier,
# ("retry", user, back) re-sends the user's identifier `back` commits ago, ("other",) is an
# unrelated commit (default user, no identifier), ("compact",) a compaction.
idem_op = st.one_of(
    st.tuples(st.just("new"), st.sampled_from(["alice", "bob"])),
    st.tuples(st.just("retry"), st.sampled_from(["alice", "bob"]), st.integers(0, 3)),
    st.tuples(st.just("other")),
    st.tuples(st.just("compact")),
)


@settings(SETTINGS, max_examples=40)
@given(ops=st.lists(idem_op, min_size=1, max_size=12), kind=st.sampled_from(["append", "overwrite-partition"]))
def test_commit_identifier_is_applied_once(ops, kind):
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        table = Table.create(f"{tmp}/t", SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "2"})
        committed: dict[tuple[str, int], tuple[int, object]] = {}  # (user, ident) -> (snapshot id, base list)
        sent: dict[str, list[int]] = {"alice": [], "bob": []}
        model = Model()
        next_row = 0

        def write(user, ident, ids):
            if kind == "append":
                return table.append(make_rows(ids, PARTITIONS), commit_user=user, commit_identifier=ident)
            return table.overwrite(make_rows(ids, PARTITIONS), partitions=[{"p": ids[0] % PARTITIONS}], commit_user=user, commit_identifier=ident)

        for op in ops:
            latest_before = table.latest_snapshot()
            count_before = 0 if latest_before is None else latest_before.id
            if op[0] == "new" or (op[0] == "retry" and not sent[op[1]]):
                user = op[1]
                ident = (sent[user][-1] + 1) if sent[user] else 0
                ids = [next_row, next_row + PARTITIONS]  # two rows of one partition
                next_row += 1
                snapshot = write(user, ident, ids)
                assert snapshot.id == count_before + 1
                assert (snapshot.commit_user, snapshot.commit_identifier) == (user, ident)
                committed[(user, ident)] = (snapshot.id, snapshot.base_manifest_list)
                sent[user].append(ident)
                model = model.append(ids) if kind == "append" else model.overwrite(ids, [ids[0] % PARTITIONS])
            elif op[0] == "retry":
                user = op[1]
                ident = sent[user][max(0, len(sent[user]) - 1 - op[2])]
                # The retry carries different rows: a retry must return the old snapshot, not write these.
                snapshot = write(user, ident, [5000, 5000 + PARTITIONS])
                assert (snapshot.id, snapshot.base_manifest_list) == committed[(user, ident)], (
                    f"retry of ({user}, {ident}) did not return its first snapshot"
                )
                assert table.latest_snapshot().id == count_before, "a retried identifier committed twice"
            elif op[0] == "other":
                ids = [next_row]
                next_row += 1
                table.append(make_rows(ids, PARTITIONS))
                model = model.append(ids)
            else:
                before = model
                result = table.compact(min_file_num=2)
                assert (result is not None) == before.compactable()
                model = model.compact() if result is not None else model
            assert rows_of(table.scan().to_arrow()) == model.rows
        assert len({sid for sid, _ in committed.values()}) == len(committed)


def test_partial_manifest_merge_after_a_big_manifest_keeps_deletes(tmp_path):
    """The case the merge-heavy property aims at, made deterministic.

    With a 3030-byte manifest target a 3-entry manifest (~3090 bytes, column statistics included) is
    big and 1-entry ones (~2980) are small. Snapshot 4's base merges the trailing run [append p1, delete p0] behind the big first
    manifest; the DELETE of p0's file must survive that merge, since its ADD is in the big manifest.
    """
    table = Table.create(
        str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "2", "manifest.target-file-size": "3030 b"}
    )
    first = table.append(make_rows([0, 1, 2]))
    table.append(make_rows([4]))
    table.delete([{"p": 0}])
    fourth = table.append(make_rows([7]))
    big = table.manifest_io.read_list(first.delta_manifest_list)
    base = table.manifest_io.read_list(fourth.base_manifest_list)
    assert [m.file_name for m in base[:1]] == [big[0].file_name] and len(base) == 2, "the scenario did not partially merge"
    assert base[1].num_deleted_files == 1
    assert rows_of(table.scan().to_arrow()) == model_rows([1, 2, 4, 7])
    assert rows_of(Table.open(table.uri).scan(snapshot_id=4).to_arrow()) == model_rows([1, 2, 4, 7])


def test_commit_identifier_twice_gives_one_snapshot(tmp_path):
    """The plain case: the same (user, identifier) appended twice is one snapshot; the second call returns the first's."""
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"])
    first = table.append(make_rows(range(6)), commit_user="job", commit_identifier=7)
    second = table.append(make_rows(range(6)), commit_user="job", commit_identifier=7)
    assert second == first
    assert [s.id for s in table.snapshots()] == [1]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(6))
    # A different user with the same identifier is a different commit.
    third = table.append(make_rows([6]), commit_user="other-job", commit_identifier=7)
    assert third.id == 2
    # So is the next identifier of the same user; after it, the old identifier still dedups.
    assert table.append(make_rows([7]), commit_user="job", commit_identifier=8).id == 3
    assert table.append(make_rows([8]), commit_user="job", commit_identifier=7) == first
    assert table.latest_snapshot().id == 3


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
