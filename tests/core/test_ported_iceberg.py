"""Apache Iceberg's snapshot expiry tests, ported to our API.

Source: apache/iceberg, core/src/test/java/org/apache/iceberg/TestRemoveSnapshots.java. Each test names
the Java method it ports and asserts the outcome Iceberg's rules give for that scenario; where we
differ on purpose, the test asserts our behaviour and says so (see "Where we differ from Paimon and
Iceberg, on purpose" in docs/lifecycle.md).

Translation: FILE_A..FILE_D (one data file each in data_bucket 0..3) are one-file commits to
partitions p = 0..3 (tests/core/ported_support.py); ``expireOlderThan(t)`` is ``older_than=t``,
``retainLast(n)`` is ``retain_last=n``; Iceberg's default retainLast is 1 and ours is 10, so tests pass
``retain_last=1`` where Iceberg relies on its default. ``deleteWith(deletedFiles::add)`` becomes a dry
run, which lists what the real run then deletes. Staged commits, branches, cherry-picks, delete files,
statistics files and cleanup levels have no counterpart here and are not ported.
"""

from __future__ import annotations

import pytest

from airflow_snaptable.core import InvalidArgumentError, Table
from tests.conftest import sorted_ids
from tests.core.ported_support import SECOND, T0, Scenario, manifest_refs
from tests.core.test_lifecycle import tree


def lists_of(table: Table, snapshot_id: int) -> set[str]:
    """The two manifest lists of a snapshot (our counterpart of Iceberg's one manifest list)."""
    snapshot = table.snapshot(snapshot_id)
    return {f"manifest/{snapshot.base_manifest_list}", f"manifest/{snapshot.delta_manifest_list}"}


def unused_after(table: Table, expired: list[int], kept: int) -> set[str]:
    """Manifest lists and manifests the expired snapshots reference and the kept one does not."""
    referenced = set().union(*(manifest_refs(table, table.snapshot(i)) for i in expired))
    return referenced - manifest_refs(table, table.snapshot(kept))


def expire_and_check(s: Scenario, expected_data: list[str], expected_manifests: set[str], **kwargs):
    """Dry run (Iceberg's deleteWith), then the real run; both must name the same files."""
    dry = s.table.expire_snapshots(dry_run=True, **kwargs)
    assert sorted(dry.data_files) == sorted(expected_data)
    assert set(dry.manifest_files) == expected_manifests
    real = Table.open(s.uri).expire_snapshots(**kwargs)
    assert real.expired_snapshot_ids == dry.expired_snapshot_ids
    assert not any(s.exists(path) for path in expected_data)
    assert not any(s.exists(path) for path in expected_manifests)
    return real


def test_expire_older_than_removes_the_older_snapshot_and_no_data_file(tmp_path):
    """Iceberg TestRemoveSnapshots#testExpireOlderThan: append A, append B, expire older than a time
    after both (retainLast 1): snapshot 2 stays current, snapshot 1 is gone, and the only files deleted
    are snapshot 1's manifest list(s); A and B both stay."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    s.add(1)
    after = s.now + 1
    expire_and_check(s, [], lists_of(s.table, 1), older_than=after, retain_last=1, now=after)
    assert s.snapshot_ids() == [2]
    assert s.exists(s.file[(1, 0)]) and s.exists(s.file[(2, 1)])
    s.check()


def test_default_retain_min_keeps_snapshots_iceberg_would_expire(tmp_path):
    """Iceberg TestRemoveSnapshots#testExpireOlderThan, run with the defaults: Iceberg's retainLast
    defaults to 1, so snapshot 1 expires. DIFFERENCE, on purpose: our retain_min (Paimon's
    snapshot.num-retained.min) defaults to 10, so the same call keeps both; with the option set to 1 the
    outcome is Iceberg's."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    s.add(1)
    after = s.now + 1
    assert s.table.expire_snapshots(older_than=after, now=after).expired_snapshot_ids == []
    assert s.snapshot_ids() == [1, 2]
    t = Scenario(tmp_path / "u", options={"snapshot.num-retained.min": "1"})
    t.add(0)
    t.add(1)
    assert t.table.expire_snapshots(older_than=after, now=after).expired_snapshot_ids == [1]
    assert t.snapshot_ids() == [2]
    s.check()
    t.check()


@pytest.mark.parametrize(
    "options, history",
    [
        pytest.param(None, "A | -A | B", id="testExpireOlderThanWithDelete"),
        pytest.param({"manifest.merge-min-count": "1"}, "A B | -A | C", id="testExpireOlderThanWithDeleteInMergedManifests"),
    ],
)
def test_expire_older_than_deletes_the_deleted_data_file(tmp_path, options, history):
    """Iceberg TestRemoveSnapshots#testExpireOlderThanWithDelete and
    #testExpireOlderThanWithDeleteInMergedManifests (manifests merged at every commit): after the
    history, expiring older than a time after it removes snapshots 1 and 2 and deletes exactly file A
    among the data files, plus the manifest lists and manifests only the expired snapshots used; the
    other files stay."""
    s = Scenario(tmp_path / "t", options=options)
    if history == "A | -A | B":
        s.add(0)
        s.drop(0)
        s.add(1)
        kept = [s.file[(3, 1)]]
    else:
        s.add(0, 1)
        s.drop(0)
        s.add(2)
        kept = [s.file[(1, 1)], s.file[(3, 2)]]
    after = s.now + 1
    expire_and_check(s, [s.file[(1, 0)]], unused_after(s.table, [1, 2], 3), older_than=after, retain_last=1, now=after)
    assert s.snapshot_ids() == [3]
    assert all(s.exists(path) for path in kept)
    s.check()


def rollback(s: Scenario, target: int, mode: str) -> None:
    """Iceberg's ``rollbackTo(target)`` in one of our two modes, with the model following."""
    if mode == "discard":
        s.table.rollback_to(snapshot_id=target)
        s.rolled_back_to(target)
    else:
        result = s.table.rollback_to(snapshot_id=target, keep_history=True)
        s.rolled_back_to(target)
        s.expected[result.latest_snapshot_id] = s.expected[target]


@pytest.mark.parametrize("mode", ["discard", "keep_history"])
def test_rollback_then_expiry_keeps_a_file_the_target_still_reads(tmp_path, mode):
    """Iceberg TestRemoveSnapshots#testExpireOlderThanWithRollbackWithReachableCleanup: append A and B,
    delete B, roll back to snapshot 1, expire: snapshot 2 goes, and no data file is deleted (B is read
    again). DIFFERENCE, on purpose: Iceberg's rollback only moves the current pointer back and leaves
    snapshot 2 to expiry; our default rollback (Paimon's) discards snapshot 2 at once, and
    ``keep_history`` commits snapshot 3 with snapshot 1's state, so 1 and 2 expire and B, deleted by 2,
    stays because 3 added it back."""
    s = Scenario(tmp_path / "t")
    s.add(0, 1)
    s.drop(1)
    rollback(s, 1, mode)
    after = s.now + SECOND
    s.table.expire_snapshots(older_than=after, retain_last=1, now=after)
    assert s.snapshot_ids() == ([1] if mode == "discard" else [3])
    assert s.exists(s.file[(1, 0)]) and s.exists(s.file[(1, 1)])
    assert sorted_ids(Table.open(s.uri).scan().to_arrow()) == s.expected[1]
    s.check()


@pytest.mark.parametrize("mode", ["discard", "keep_history"])
def test_rollback_then_expiry_deletes_the_rolled_back_file(tmp_path, mode):
    """Iceberg TestRemoveSnapshots#testExpireOlderThanWithRollbackAndMergedManifests: append A, append B,
    roll back to snapshot 1, expire: snapshot 2 goes and B, added only by the rolled-back snapshot, is
    deleted; A stays. (Our default rollback deletes B itself; with ``keep_history`` the expiry does.)"""
    s = Scenario(tmp_path / "t")
    s.add(0)
    s.add(1)
    rollback(s, 1, mode)
    after = s.now + SECOND
    s.table.expire_snapshots(older_than=after, retain_last=1, now=after)
    assert not s.exists(s.file[(2, 1)])
    assert s.exists(s.file[(1, 0)])
    assert sorted_ids(Table.open(s.uri).scan().to_arrow()) == s.expected[1]
    s.check()


# Snapshot k (1-based) is committed at T0 + (k - 1) s; older_than is given as an offset from T0.
@pytest.mark.parametrize(
    "commits, older_than, retain_last, survivors",
    [
        pytest.param(3, 2001, 2, [2, 3], id="testRetainLastWithExpireOlderThan"),
        pytest.param(2, 1001, 3, [1, 2], id="testRetainLastWithTooFewSnapshots"),
        pytest.param(3, 2001, 4, [1, 2, 3], id="testRetainNLargerThanCurrentSnapshots"),
        pytest.param(4, 1000, 2, [2, 3, 4], id="testRetainLastKeepsExpiringSnapshot"),  # older than snapshot 2's time
        pytest.param(3, 2000, 1, [3], id="testExpireOlderThanMultipleCalls"),  # the last expireOlderThan (t3) wins
        pytest.param(3, 2001, 1, [3], id="testRetainLastMultipleCalls"),  # the last retainLast (1) wins
    ],
)
def test_retain_last_and_older_than_together(tmp_path, commits, older_than, retain_last, survivors):
    """Iceberg TestRemoveSnapshots#testRetainLastWithExpireOlderThan, #testRetainLastWithTooFewSnapshots,
    #testRetainNLargerThanCurrentSnapshots, #testRetainLastKeepsExpiringSnapshot,
    #testExpireOlderThanMultipleCalls, #testRetainLastMultipleCalls: retainLast n keeps the n newest
    whatever their age, and no snapshot at or after the cut-off time expires. (Iceberg's builders take
    repeated calls, the last one winning; ours take one value.)"""
    s = Scenario(tmp_path / "t")
    for k in range(commits):
        s.add(k % 4, at=T0 + k * SECOND)
    s.table.expire_snapshots(older_than=T0 + older_than, retain_last=retain_last, now=T0 + 10 * SECOND)
    assert s.snapshot_ids() == survivors
    s.check()


def test_older_than_keeps_the_snapshot_that_was_current_at_that_time(tmp_path):
    """Iceberg TestRemoveSnapshots#testRetainLastKeepsExpiringSnapshot, with the cut-off between two
    commits: snapshots at T0, +1 s, +2 s, +3 s, expireOlderThan(T0 + 1.5 s), retainLast 2. Iceberg
    expires every snapshot whose own time is older, 1 and 2, leaving [3, 4]. DIFFERENCE, on purpose
    (Paimon's time rule): a snapshot expires only once its successor is older than the cut-off, so
    snapshot 2, the table's state at T0 + 1.5 s, stays and reading as of that time still works."""
    s = Scenario(tmp_path / "t")
    for k in range(4):
        s.add(k, at=T0 + k * SECOND)
    s.table.expire_snapshots(older_than=T0 + 1500, retain_last=2, now=T0 + 10 * SECOND)
    assert s.snapshot_ids() == [2, 3, 4]
    assert sorted_ids(Table.open(s.uri).scan(as_of=T0 + 1500).to_arrow()) == s.expected[2]
    s.check()


def test_retain_last_zero_is_refused(tmp_path):
    """Iceberg TestRemoveSnapshots#testRetainZeroSnapshots: retainLast(0) is an argument error, and
    nothing changes."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    s.add(1)
    before = tree(s.uri)
    with pytest.raises(InvalidArgumentError):
        s.table.expire_snapshots(retain_last=0, older_than=s.now, now=s.now)
    assert tree(s.uri) == before


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(None, id="testScanExpiredManifestInValidSnapshotAppend"),
        pytest.param({"manifest.merge-min-count": "1"}, id="testScanExpiredManifestInValidSnapshotFastAppend"),
    ],
)
def test_file_replaced_by_an_overwrite_is_deleted(tmp_path, options):
    """Iceberg TestRemoveSnapshots#testScanExpiredManifestInValidSnapshotAppend and #...FastAppend
    (manifests merged at every commit): append A and B, overwrite adding C and deleting A, append D,
    expire older than after D: A is deleted; B, C and D stay."""
    s = Scenario(tmp_path / "t", options=options)
    s.add(0, 1)
    s.replace(0)
    s.add(3)
    after = s.now + 1
    dry = s.table.expire_snapshots(older_than=after, retain_last=1, now=after, dry_run=True)
    assert s.file[(1, 0)] in dry.data_files
    s.table.expire_snapshots(older_than=after, retain_last=1, now=after)
    assert not s.exists(s.file[(1, 0)])
    assert all(s.exists(s.file[key]) for key in ((1, 1), (2, 0), (3, 3)))
    s.check()


def test_files_rewritten_by_compaction_are_deleted_after_manifests_are_rewritten(tmp_path):
    """Iceberg TestRemoveSnapshots#dataFilesCleanup: A and B appended, rewritten into new files, the
    manifests rewritten too; expiring older than after all that deletes A and B. Here A and B are two
    appends to one partition, one compaction rewrites them into C, and manifests are merged at every
    commit; C stays and the table reads the same rows."""
    s = Scenario(tmp_path / "t", options={"manifest.merge-min-count": "1"})
    s.add(0)
    s.add(0)
    s.compact()
    a, b, c = s.file[(1, 0)], s.file[(2, 0)], s.file[(3, 0)]
    after = s.now + 1
    dry = s.table.expire_snapshots(older_than=after, retain_last=1, now=after, dry_run=True)
    assert sorted(dry.data_files) == sorted([a, b])
    s.table.expire_snapshots(older_than=after, retain_last=1, now=after)
    assert (s.exists(a), s.exists(b), s.exists(c)) == (False, False, True)
    s.check()


@pytest.mark.parametrize(
    "options, kwargs, survivors",
    [
        # MIN_SNAPSHOTS_TO_KEEP = 3, expireOlderThan(now): nothing expires, nothing is deleted
        pytest.param({"snapshot.num-retained.min": "3"}, "older_than_now", [1, 2, 3], id="testExpireWithDefaultRetainLast"),
        # MAX_SNAPSHOT_AGE_MS = 1 and nothing else (Iceberg's default retainLast 1 set explicitly here)
        pytest.param({"snapshot.time-retained": "1 ms", "snapshot.num-retained.min": "1"}, "defaults", [3],
                     id="testExpireWithDefaultSnapshotAge"),
    ],
)
def test_table_options_are_the_defaults_of_expiry(tmp_path, options, kwargs, survivors):
    """Iceberg TestRemoveSnapshots#testExpireWithDefaultRetainLast and #testExpireWithDefaultSnapshotAge:
    with the table's minimum number of snapshots (3), expiring older than now keeps all three and
    deletes nothing; with the table's maximum snapshot age (1 ms), an expiry with no arguments keeps
    only the current snapshot and deletes only the expired snapshots' manifest lists (appends only: every
    data file and manifest is still in use)."""
    s = Scenario(tmp_path / "t", options=options)
    for k in range(3):
        s.add(k)
    now = s.now + 10
    args = dict(older_than=now, now=now) if kwargs == "older_than_now" else dict(now=now)
    expired = [i for i in (1, 2, 3) if i not in survivors]
    expected_lists = set().union(*(lists_of(s.table, i) for i in expired)) if expired else set()
    expire_and_check(s, [], expected_lists, **args)
    assert s.snapshot_ids() == survivors
    s.check()


def test_aged_tag_is_removed_by_expire_tags_not_by_expire_snapshots(tmp_path):
    """Iceberg TestRemoveSnapshots#testTagExpiration and #testFileCleanupOnAllRefsAgedOff: a tag on
    snapshot 1 (file A) with a max age of 20 ms, then B and C appended; once the tag is older than that,
    Iceberg's snapshot expiry drops the tag and snapshot 1, deleting only snapshot 1's manifest list (A
    is still current). DIFFERENCE, on purpose (as Paimon): ``expire_snapshots`` never deletes tags, the
    tag keeps snapshot 1's state readable; ``expire_tags`` removes it; the files deleted in the end are
    the same: snapshot 1's lists, no data file."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    s.table.create_tag("tag", 1, time_retained="20 ms")
    s.add(1, 2)
    first_lists = lists_of(s.table, 1)
    later = s.now + 1000
    result = s.table.expire_snapshots(older_than=later, retain_last=1, now=later)
    assert result.expired_snapshot_ids == [1] and result.deleted_data_files == 0
    assert s.tag_names() == {"tag"}
    assert sorted_ids(Table.open(s.uri).scan(tag="tag").to_arrow()) == s.expected[1]
    assert s.table.expire_tags(now=later) == ["tag"]
    assert s.tag_names() == set()
    assert not any(s.exists(path) for path in first_lists)
    assert all(s.exists(s.file[key]) for key in ((1, 0), (2, 1), (2, 2)))
    s.check()


def test_tagged_snapshot_expires_and_its_tag_keeps_the_state(tmp_path):
    """Iceberg TestRemoveSnapshots#testFailRemovingSnapshotWhenStillReferencedByTag: a snapshot a tag
    references is not removed (Iceberg refuses to expire it). DIFFERENCE, on purpose (as Paimon): the
    snapshot leaves the history like any other, and the tag, which holds a copy of it, keeps its state
    and files readable."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    s.table.create_tag("tag", 1)
    s.add(1)
    later = s.now + 1000
    s.table.expire_snapshots(older_than=later, retain_last=1, now=later)
    assert s.snapshot_ids() == [2]
    assert sorted_ids(Table.open(s.uri).scan(tag="tag").to_arrow()) == s.expected[1]
    assert s.exists(s.file[(1, 0)])
    s.check()


def test_expiry_with_nothing_to_remove_changes_nothing(tmp_path):
    """Iceberg TestRemoveSnapshots#testRemoveSnapshotsNoOp: with nothing to remove, expireOlderThan(now)
    with retainLast 1 is a no-op: the table's files stay exactly as they were."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    before = tree(s.uri)
    result = s.table.expire_snapshots(older_than=s.now + 1, retain_last=1, now=s.now + 1)
    assert result.expired_snapshot_ids == []
    assert tree(s.uri) == before
    s.check()
