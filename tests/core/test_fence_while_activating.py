"""A plan's fence never disappears between a listing of the plans and its reads (issue 34, item 0).

A deleting plan goes from ``plan/pending-<id>.json`` to ``plan/plan-<id>.json`` when its owner
activates it: the active file is written, then the pending one deleted. A tag (or a consumer) being
created checks the fences after announcing itself: it lists the plans, then reads each. When the
activation falls between the two (on an object store each is a round trip of milliseconds: the
Azure race hit it under load), the pending file is gone when read, and the check used to skip the
plan as finished: no fence, the tag went through on a snapshot the plan was expiring, the plan (whose
protection was read before the tag was announced) deleted its manifest list, and the tag outlived
its files (``MissingMetadataError`` reading it).

The interleaving is injected deterministically on local files and on each object store: the expiry
runs on a thread and stops right before it activates its plan (its protection is read); the tag's
second read of the pending plan (its fence check, after the rollback-ceiling check) lets the
activation run to the deletion of the pending file and only then reads. The tag must back out (or,
if it went through, hold its files); the consumer must back out or keep its snapshot.
"""

from __future__ import annotations

import threading

import pytest

from airflow_snaptable.core import SnapshotNotFoundError, Table
from tests.conftest import SCHEMA, make_rows, sorted_ids

#: The tagger's reads of the pending plan: the first is its rollback-ceiling check, the second its fence check.
FENCE_CHECK_READ = 2
WAIT = 60  # seconds: a bound on a hang, never reached when the interleaving runs


class Interleaving:
    """The expiry stops right before activating its plan; the checker's ``FENCE_CHECK_READ``-th read of the
    pending plan lets the activation run until the pending file is deleted; the expiry then waits until the
    checker is done before it deletes anything."""

    def __init__(self) -> None:
        self.activating = threading.Event()
        self.activate = threading.Event()
        self.pending_gone = threading.Event()
        self.checked = threading.Event()
        self._deleting_pending = False
        self.pending_reads = 0

    def expiry_hook(self, kind: str, rel: str) -> None:
        if self._deleting_pending and not self.pending_gone.is_set():
            self.pending_gone.set()  # the operation after the pending file's delete: it is gone
            assert self.checked.wait(WAIT)
        if kind == "write" and "/plan/plan-" in f"/{rel}" and not self.activating.is_set():  # Paimon: under snaptable/
            self.activating.set()
            assert self.activate.wait(WAIT)
        if kind == "delete" and "/plan/pending-" in f"/{rel}":
            self._deleting_pending = True

    def checker_hook(self, kind: str, rel: str) -> None:
        if kind == "read" and "/plan/pending-" in f"/{rel}":
            self.pending_reads += 1
            if self.pending_reads == FENCE_CHECK_READ:
                self.activate.set()
                assert self.pending_gone.wait(WAIT)


def _history(uri: str, options) -> dict[int, list[int]]:
    table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=options, options={"manifest.merge-min-count": "2"})
    model, rows = {}, []
    for start in range(0, 12, 3):
        rows += list(range(start, start + 3))
        model[table.append(make_rows(range(start, start + 3))).id] = sorted(rows)
    table.overwrite(make_rows([30]), partitions=[{"p": 0}])
    model[5] = sorted([i for i in rows if i % 3 != 0] + [30])
    return model


def _race(uri: str, options, check) -> tuple[Interleaving, object]:
    """Expire all but the 2 newest snapshots while ``check(table)`` (a tag or a consumer on an expiring snapshot)
    checks the fences; returns the interleaving and what ``check`` returned (or the SnapshotNotFoundError it raised)."""
    steps = Interleaving()
    expiry, checker = Table.open(uri, options), Table.open(uri, options)
    expiry.storage.on_operation = steps.expiry_hook
    failures: list[BaseException] = []

    def expire() -> None:
        try:
            expiry.expire_snapshots(retain_min=2, time_retained="0 s", now=4_102_444_800_000)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
            steps.activating.set()

    thread = threading.Thread(target=expire)
    thread.start()
    try:
        assert steps.activating.wait(WAIT)
        assert not failures, failures
        checker.storage.on_operation = steps.checker_hook
        try:
            outcome = check(checker)
        except SnapshotNotFoundError as exc:
            outcome = exc
        finally:
            steps.checked.set()
            steps.activate.set()
    finally:
        thread.join(WAIT)
    assert not failures, failures
    assert steps.pending_gone.is_set(), "the check did not read the pending plan across its activation"
    return steps, outcome


def _check_tag(uri: str, options) -> None:
    model = _history(uri, options)
    _steps, outcome = _race(uri, options, lambda t: t.create_tag("during-activation", 2))
    fresh = Table.open(uri, options)
    assert fresh.snapshot_manager.list_ids() == [4, 5]
    for tag in fresh.tags():  # a tag that went through holds its files
        assert sorted_ids(fresh.scan(tag=tag.name).to_arrow()) == model[tag.snapshot_id]
    assert isinstance(outcome, SnapshotNotFoundError), "the tag did not see the plan expiring its snapshot"
    assert fresh.verify().ok


def _check_consumer(uri: str, options) -> None:
    _history(uri, options)
    Table.open(uri, options).update_consumer("reader", 1)
    Table.open(uri, options).delete_consumer("reader")
    _steps, outcome = _race(uri, options, lambda t: t.update_consumer("reader", 2))
    fresh = Table.open(uri, options)
    consumers = {c.id: c.next_snapshot for c in fresh.consumers()}
    assert all(position >= fresh.earliest_snapshot().id for position in consumers.values()), (consumers, fresh.earliest_snapshot().id)
    assert isinstance(outcome, SnapshotNotFoundError), "the consumer did not see the plan expiring its snapshot"


CHECKS = {"tag": _check_tag, "consumer": _check_consumer}


@pytest.mark.parametrize("what", sorted(CHECKS))
def test_a_fence_check_across_the_plans_activation_sees_the_plan(tmp_path, what):
    CHECKS[what](str(tmp_path / "t"), None)


@pytest.mark.parametrize("object_store", [pytest.param("moto", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.cloud),
                                          pytest.param("azure", marks=pytest.mark.cloud)], indirect=True)
@pytest.mark.parametrize("what", sorted(CHECKS))
def test_a_fence_check_across_the_plans_activation_sees_the_plan_on_object_stores(object_store, object_store_uri, what):
    CHECKS[what](f"{object_store_uri}/t", object_store.storage_options())


def test_on_paimon_a_tag_checking_the_fences_across_the_plans_activation_backs_out(paimon, tmp_path):
    from tests.paimon.test_paimon_lifecycle import check
    from tests.paimon.test_paimon_noncurrent import _open

    warehouse = paimon.copy(tmp_path / "w")
    uri = _open(warehouse, "app").uri
    _steps, outcome = _race(uri, None, lambda t: t.create_tag("during-activation", 3))
    check(paimon, warehouse, "app", [5, 6], ["t2", "t4"])  # pypaimon reads every tag left
    assert isinstance(outcome, SnapshotNotFoundError), "the tag did not see the plan expiring its snapshot"


# -- the same rule for the re-add registry (core/lifecycle/readds.py) --------------------------------------


def test_a_readd_entry_finalised_between_the_listing_and_its_read_is_read(tmp_path):
    """A keep-history rollback finalises its entry (``readd-<snapshot>.json`` written, the pending one deleted)
    while a plan's protection reads the registry: the reader that listed the pending entry finds it gone and
    must still see the files it re-adds, under the final name its listing did not show."""
    from airflow_snaptable.core.io.storage import Storage
    from airflow_snaptable.core.lifecycle.readds import ReaddRegistry

    storage = Storage.from_uri(str(tmp_path / "t"))
    writer, reader = ReaddRegistry(storage), ReaddRegistry(Storage.from_uri(str(tmp_path / "t")))
    pending = writer.add_pending(["data/p=0/re-added.parquet"])

    def finalise_before_the_read(kind: str, rel: str) -> None:
        if kind == "read" and rel == f"readd/{pending}":
            reader.storage.on_operation = None
            writer.finalize(pending, 7, ["data/p=0/re-added.parquet"])

    reader.storage.on_operation = finalise_before_the_read
    entries = reader.entries()
    assert [(e.snapshot_id, sorted(e.paths)) for e in entries] == [(7, ["data/p=0/re-added.parquet"])]
    assert any(e.protects("data/p=0/re-added.parquet", 5) for e in entries)


def test_a_keep_history_rollback_while_a_plan_is_pending_backs_out(tmp_path):
    """A keep-history rollback registers the files it re-adds, then looks for plans that delete them. A plan
    still pending has read its protection (the registry without the entry) and lists no candidate yet: the
    rollback must back out (it used to look at active plans only, committed, and the plan deleted the files
    its snapshot re-added)."""
    from airflow_snaptable.core import CommitConflictError

    uri = str(tmp_path / "t")
    model = _history(uri, None)  # snapshot 5 overwrote p=0: the p=0 files of 1..4 are deleted at 5
    Table.open(uri).append(make_rows([40]))  # 6
    model[6] = sorted(model[5] + [40])
    expiry = Table.open(uri)
    raised: list[BaseException] = []

    def rollback_at_activation(kind: str, rel: str) -> None:
        if kind == "write" and rel.startswith("plan/plan-") and not raised:
            try:
                result = Table.open(uri).rollback_to(snapshot_id=4, keep_history=True)
                model[result.latest_snapshot_id] = model[4]
                raised.append(AssertionError("the rollback went through"))
            except CommitConflictError as exc:
                raised.append(exc)

    expiry.storage.on_operation = rollback_at_activation
    expiry.expire_snapshots(retain_min=1, time_retained="0 s")  # 1..5: the p=0 files of 4 are candidates
    fresh = Table.open(uri)
    for snapshot in fresh.snapshots():
        assert sorted_ids(fresh.scan(snapshot_id=snapshot.id).to_arrow()) == model[snapshot.id]
    assert fresh.verify().ok
    assert raised and isinstance(raised[0], CommitConflictError), raised
