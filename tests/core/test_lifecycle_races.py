"""Processes racing on one local table: writers, an expiry loop, a tagger and a consumer (invariants 1, 2, 4, 5).

For ~12 s: two writers append to partitions 0-1 and now and then overwrite
partition 2; one process runs ``expire_snapshots(retain_min=2, time_retained="0 s")``
in a loop; one creates tags on random snapshots (mostly the oldest ones, which
are the ones being expired) and deletes some; one moves a consumer forward and
keeps checking that the snapshot it holds is still there.

Every process logs what it did. At the end the writers' logs give the rows of
every snapshot (the model); every surviving snapshot and tag must scan to it,
every successful commit must be in the history exactly once, and the consumer's
position must never have been expired while it was held.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import time
from collections import Counter

import pytest

from airflow_snaptable.core import SnapshotNotFoundError, SnapTableError, Table
from tests.conftest import SCHEMA, make_rows, sorted_ids

pytestmark = pytest.mark.slow

DURATION = 12.0  # seconds of racing
CONSUMER = "reader"
# Between two commits of one writer. Without a pause a writer stalled by the OS for a few tens of milliseconds
# almost always hits the resurrected-snapshot-id bug (see the known-bug branch of the test), which hides the rest.
WRITER_PAUSE = 0.03


def _guarded(role: str):
    """Run a worker so that any unexpected exception is reported to the parent instead of hanging it."""

    def wrap(function):
        def run(*args):
            results = args[-1]
            try:
                function(*args)
            except BaseException:  # noqa: BLE001 - reported to the parent test
                import traceback

                results.put(("crashed", role, traceback.format_exc()))

        run.__name__ = run.__qualname__ = function.__name__
        run.__wrapped__ = function
        return run

    return wrap


class RowCache:
    """Rows of data files, read once each (data files are immutable): a full scan of many snapshots stays cheap."""

    def __init__(self, table: Table):
        self.table = table
        self.rows: dict[str, list[int]] = {}

    def scan(self, **kwargs) -> list[int]:
        """The snapshot's (or tag's) rows: its files as planned from its manifests, every one read from storage."""
        out: list[int] = []
        for data_file in self.table.scan(**kwargs).files():
            if data_file.path not in self.rows:
                self.rows[data_file.path] = sorted_ids(self.table.read_files([data_file]))
            out += self.rows[data_file.path]
        return sorted(out)


def _append_ids(writer: int, i: int) -> list[int]:
    """Fresh ids in partitions 0 and 1 (p = id % 3)."""
    base = 3 * (writer * 10**6 + i * 10)
    return [base, base + 1, base + 3 + 1]


def _overwrite_ids(writer: int, i: int) -> list[int]:
    """Fresh ids in partition 2."""
    base = 3 * (writer * 10**6 + i * 10)
    return [base + 2, base + 3 + 2]


@_guarded("writer")
def _writer(uri: str, options, writer: int, start, results) -> None:
    table = Table.open(uri, options)
    commits, failures = [], []
    start.wait()
    deadline = time.time() + DURATION
    i = 0
    while time.time() < deadline:
        i += 1
        if i % 7 == 0:
            ids = _overwrite_ids(writer, i)
            try:
                snapshot = table.overwrite(make_rows(ids), partitions=[{"p": 2}], commit_user=f"writer-{writer}")
                commits.append((snapshot.id, "overwrite", ids, f"writer-{writer}"))
            except SnapTableError as exc:  # a conflict with the other writer's overwrite, or its base expired
                failures.append(("overwrite", ids, f"{type(exc).__name__}: {exc}"))
        else:
            ids = _append_ids(writer, i)
            try:
                snapshot = table.append(make_rows(ids), commit_user=f"writer-{writer}", commit_identifier=i)
                commits.append((snapshot.id, "append", ids, f"writer-{writer}"))
            except SnapTableError as exc:
                failures.append(("append", ids, f"{type(exc).__name__}: {exc}"))
        time.sleep(WRITER_PAUSE)
    results.put(("writer", writer, commits, failures))


@_guarded("expirer")
def _expirer(uri: str, options, start, results) -> None:
    table = Table.open(uri, options)
    runs, expired, errors = 0, [], Counter()
    start.wait()
    deadline = time.time() + DURATION
    while time.time() < deadline:
        runs += 1
        try:
            result = table.expire_snapshots(retain_min=2, time_retained="0 s")
            expired += result.expired_snapshot_ids
        except SnapTableError as exc:  # e.g. a snapshot vanished while planning (another process finished the plan)
            errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
        time.sleep(0.005)
    results.put(("expirer", runs, expired, dict(errors)))


@_guarded("tagger")
def _tagger(uri: str, options, seed: int, start, results) -> None:
    rng = random.Random(seed)
    table = Table.open(uri, options)
    cache = RowCache(table)
    created: dict[str, int] = {}  # every tag this process created: name -> snapshot id
    live: dict[str, int] = {}  # ... and has not deleted
    deleted: list[str] = []
    uncertain: set[str] = set()  # deletions that raised: the tag may or may not exist
    read_back: dict[str, list[int]] = {}  # rows read right after creating the tag
    refused, errors = Counter(), Counter()
    start.wait()
    deadline = time.time() + DURATION
    i = 0
    while time.time() < deadline:
        i += 1
        earliest, latest = table.snapshot_manager.earliest_id(), table.snapshot_manager.latest_id()
        if earliest is None or latest is None:
            continue
        roll = rng.random()
        if roll < 0.6:
            target = max(1, earliest - 1) + rng.randint(0, 3)  # the oldest snapshots: the ones being expired
        elif roll < 0.8:
            target = rng.randint(max(1, earliest - 20), latest)  # anything, including long-expired ids
        else:
            target = None  # the latest
        name = f"t{i}"
        try:
            tag = table.create_tag(name, target)
            live[name] = created[name] = tag.snapshot_id
            if rng.random() < 0.5:
                read_back[name] = cache.scan(tag=name)
        except SnapshotNotFoundError:
            refused["snapshot gone"] += 1
        except SnapTableError as exc:
            errors[f"create {type(exc).__name__}: {str(exc)[:80]}"] += 1
        if live and (len(live) > 25 or rng.random() < 0.3):
            victim = rng.choice(sorted(live))
            try:
                table.delete_tag(victim)
                deleted.append(victim)
            except SnapTableError as exc:
                uncertain.add(victim)
                errors[f"delete {type(exc).__name__}: {str(exc)[:80]}"] += 1
            del live[victim]
        time.sleep(0.01)
    results.put(("tagger", created, live, deleted, sorted(uncertain), read_back, dict(refused), dict(errors)))


@_guarded("consumer")
def _consumer(uri: str, options, seed: int, start, results) -> None:
    rng = random.Random(seed)
    table = Table.open(uri, options)
    position = table.consumer(CONSUMER).next_snapshot
    violations, regressions, moves, errors, checks = [], [], 0, Counter(), 0
    start.wait()
    deadline = time.time() + DURATION
    while time.time() < deadline:
        # What the consumer holds must still be there: id >= EARLIEST, and readable.
        latest = table.snapshot_manager.latest_id()
        earliest = table.snapshot_manager.earliest_id()
        checks += 1
        if latest is None or latest + 1 < position:
            regressions.append(f"LATEST is {latest} but the consumer already read up to {position - 1}")
            time.sleep(0.01)
            continue
        if earliest is not None and position < earliest:
            violations.append(f"held {position} but EARLIEST is {earliest}")
        if position <= latest:
            try:
                gone = [f.path for f in table.scan(snapshot_id=position).files() if not table.storage.exists(f.path)]
                if gone:
                    violations.append(f"held {position} but its files are gone: {gone[:3]}")
            except SnapTableError as exc:
                violations.append(f"held {position} but cannot read it: {type(exc).__name__}: {exc}")
        if rng.random() < 0.5:
            target = rng.randint(position, latest + 1)  # forward only (has read everything before target)
            try:
                table.update_consumer(CONSUMER, target)
                position = target
                moves += 1
            except SnapTableError as exc:
                errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
        time.sleep(0.01)
    final = table.consumer(CONSUMER).next_snapshot
    results.put(("consumer", position, final, moves, checks, violations, regressions, dict(errors)))


def _model(commits: dict[int, tuple[str, list[int], str]], latest: int) -> dict[int, list[int]]:
    rows: set[int] = set()
    model = {}
    for snapshot_id in range(1, latest + 1):
        kind, ids, _user = commits[snapshot_id]
        if kind == "append":
            rows |= set(ids)
        else:
            rows = {i for i in rows if i % 3 != 2} | set(ids)
        model[snapshot_id] = sorted(rows)
    return model


def test_writers_expiry_tags_and_a_consumer_race_on_one_table(tmp_path):
    _race(str(tmp_path / "table"), None, activity=1.0)


@pytest.mark.s3
@pytest.mark.parametrize("s3_server", ["seaweedfs"], indirect=True)  # moto serialises writes: no real race there
def test_writers_expiry_tags_and_a_consumer_race_on_one_s3_table(s3_server, s3_table_uri):
    _race(s3_table_uri, s3_server.storage_options(), activity=0.35)  # every operation is a few HTTP round trips


def _race(uri: str, options, activity: float) -> None:
    """``activity`` scales the "the race really happened" minimums (commits, expiries, tags, moves)."""
    table = Table.create(uri, SCHEMA, partition_by=["p"], options={"manifest.merge-min-count": "5"}, storage_options=options)
    first_ids = [0, 1, 3, 4]
    first = table.append(make_rows(first_ids), commit_user="setup")
    table.update_consumer(CONSUMER, first.id)  # registered before the race: it holds snapshot 1

    context = mp.get_context("spawn")
    start = context.Barrier(5)
    results = context.Queue()
    processes = [
        context.Process(target=_writer, args=(uri, options, 1, start, results)),
        context.Process(target=_writer, args=(uri, options, 2, start, results)),
        context.Process(target=_expirer, args=(uri, options, start, results)),
        context.Process(target=_tagger, args=(uri, options, 7, start, results)),
        context.Process(target=_consumer, args=(uri, options, 11, start, results)),
    ]
    for process in processes:
        process.start()
    reports = [results.get(timeout=DURATION + 90) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    crashed = [report for report in reports if report[0] == "crashed"]
    assert not crashed, "\n".join(f"{role} died:\n{trace}" for _, role, trace in crashed)
    assert [process.exitcode for process in processes] == [0] * len(processes)
    by_role: dict[str, list] = {}
    for report in reports:
        by_role.setdefault(report[0], []).append(report)

    (_role, created, live, deleted, uncertain, read_back, refused, tag_errors), = by_role["tagger"]
    (_role, position, final_position, moves, checks, violations, regressions, consumer_errors), = by_role["consumer"]
    fresh = Table.open(uri, options)
    rows = RowCache(fresh)

    # -- invariant 4: every successful commit is in the history exactly once -----------------------
    reported = [(first.id, "append", first_ids, "setup")] + [c for r in by_role["writer"] for c in r[2]]
    twice = sorted(s for s, count in Counter(c[0] for c in reported).items() if count > 1)
    if twice:
        # Known bug (pinned deterministically by test_lifecycle.py::
        # test_commit_on_an_expired_base_does_not_resurrect_an_expired_snapshot_id): a writer whose base snapshot
        # was expired while it committed re-creates the expired id. The model is then ambiguous; check what does
        # not depend on it, then report the known failure.
        for tag in fresh.tags():
            if tag.snapshot_id not in twice:
                rows.scan(tag=tag.name)
        assert not set(live) - {t.name for t in fresh.tags()}, "tags created and never deleted are gone"
        assert violations == []
        pytest.fail(f"snapshot ids {twice} were committed twice: a writer whose base had expired re-created "
                     "an expired snapshot id")
    commits: dict[int, tuple[str, list[int], str]] = {}
    for snapshot_id, kind, ids, user in reported:
        commits[snapshot_id] = (kind, ids, user)
    failed_appends = [ids for r in by_role["writer"] for kind, ids, _error in r[3] if kind == "append"]
    ids = fresh.snapshot_manager.list_ids()
    assert ids == list(range(ids[0], ids[-1] + 1)), f"snapshot ids are not contiguous: {ids}"
    latest = ids[-1]
    assert sorted(commits) == list(range(1, latest + 1)), "a snapshot no writer reported, or a reported one missing"
    model = _model(commits, latest)
    for snapshot in fresh.snapshots():
        assert snapshot.commit_user == commits[snapshot.id][2]

    # -- invariant 1: every snapshot EARLIEST..LATEST scans to the model -----------------------------
    for snapshot_id in ids:
        assert rows.scan(snapshot_id=snapshot_id) == model[snapshot_id], f"snapshot {snapshot_id}"

    # No successful append lost: partitions 0-1 of the latest state are exactly the successful appends.
    latest_rows = rows.scan()
    appended = sorted(i for kind, row_ids, _ in commits.values() if kind == "append" for i in row_ids)
    assert [i for i in latest_rows if i % 3 != 2] == appended
    assert not set(latest_rows) & {i for ids_ in failed_appends for i in ids_}
    overwrites = [commits[s][1] for s in sorted(commits) if commits[s][0] == "overwrite"]
    assert [i for i in latest_rows if i % 3 == 2] == (sorted(overwrites[-1]) if overwrites else [])

    # -- invariants 2 and 5: every tag the tagger kept survives and scans to its snapshot's rows --------
    surviving = {t.name: t for t in fresh.tags()}
    missing = sorted(set(live) - set(surviving))
    assert not missing, f"tags created successfully and never deleted are gone: {missing}"
    assert set(surviving) <= set(live) | set(uncertain), "a deleted tag came back"
    for name, tag in surviving.items():
        if name in live:
            assert tag.snapshot_id == live[name]
        assert rows.scan(tag=name) == model[tag.snapshot_id], f"tag {name} at {tag.snapshot_id}"
    for name, seen in read_back.items():  # what the tag showed right after it was created
        assert seen == model[created[name]], f"tag {name} read back"

    # -- invariant 2 for consumers: the held position was never expired --------------------------------
    assert violations == []
    assert regressions == [], "LATEST went backwards"
    assert final_position == position >= ids[0]

    # -- nothing missing; after orphan cleaning nothing leaked either; no plan left ----------------------
    verify = fresh.verify()
    assert verify.missing_files == []
    now = int(time.time() * 1000)
    fresh.remove_orphan_files(older_than=now, dry_run=False, now=now + 1000)
    after = Table.open(uri, options).verify()
    assert after.ok, after
    storage = Table.open(uri, options).storage
    assert storage.list_names("plan") == []  # no process died: every plan finished
    assert storage.list_names("intent") == []  # ... and every intent was withdrawn

    # -- the race really happened -------------------------------------------------------------------
    (_role, runs, expired, expire_errors), = by_role["expirer"]
    assert latest > 40 * activity, f"only {latest} commits"
    assert len(expired) > 10 * activity, (runs, expire_errors)
    assert moves > 5 * activity and checks > 20 * activity
    assert len(live) + len(deleted) > 20 * activity, (refused, tag_errors)
    on_expired = [name for name, tag in surviving.items() if tag.snapshot_id < ids[0]]
    assert on_expired, "no surviving tag holds an expired snapshot: the race did not exercise tag protection"
    print(
        f"\ncommits={latest} expired={len(expired)} expiry runs={runs} expiry errors={expire_errors}"
        f"\ntags live={len(live)} deleted={len(deleted)} on expired snapshots={len(on_expired)} refused={refused} "
        f"tag errors={tag_errors}\nconsumer moves={moves} errors={consumer_errors}"
        f"\nwriter failures={[f[2][:60] for r in by_role['writer'] for f in r[3]]}"
        f"\nunreferenced before orphan clean={len(verify.unreferenced_files)}"
    )

