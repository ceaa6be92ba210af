"""Apache Paimon's automatic-tag and orphan-cleaning tests, ported to our API.

Sources (apache/paimon, paimon-core/src/test/java/org/apache/paimon/): tag/TagAutoManagerTest
(TagAutoCreation) and operation/LocalOrphanFilesCleanTest. Each test names the Java method it ports;
where we differ on purpose, the test asserts our behaviour and says so (see "Where we differ from
Paimon and Iceberg, on purpose" in docs/lifecycle.md).

Translation of TagAutoManagerTest: Paimon creates automatic tags while committing (tags first, then
expiry); here every commit is followed by ``create_periodic_tags(now=<commit time>)``, and by
``expire_snapshots()`` where the Java test expires. Paimon's tests time tags by watermark; ours by
commit time, so the commit times are the Java test's watermarks. The one deliberate difference that
shows in most of them: Paimon tags a period on the first snapshot committed after it ends (so the very
first commit already tags the period before it), we tag the last snapshot committed before it ends (the
table's state at the end of the period; a period that ended before the first snapshot has no state and
gets no tag).
"""

from __future__ import annotations

import os
import time

import pytest

from airflow_snaptable.core import InvalidArgumentError, Table
from airflow_snaptable.core.errors import CorruptMetadataError
from tests.core.ported_support import NEVER, Scenario, files_under, manifest_refs, mixed_history, utc

DAY_SECONDS = 86_400


def tags_of(s: Scenario) -> dict[str, int]:
    """Tag name -> snapshot id, read by a fresh reader."""
    return {t.name: t.snapshot_id for t in Table.open(s.uri).tags()}


def commit_and_tag(s: Scenario, at: str, **periodic) -> None:
    """One commit at ``at`` (UTC), then the automatic tag run of that moment."""
    s.add(0, at=utc(at))
    s.table.create_periodic_tags(now=utc(at), **periodic)


# -- TagAutoManagerTest --------------------------------------------------------------------------


def test_hourly_tags_with_retention_and_snapshot_expiry(tmp_path):
    """Paimon TagAutoManagerTest#testTag: hourly tags, at most 3. Commits at 12:12, 12:59, 13:00, 14:00,
    15:00, 15:01, 15:02, then with expiry retain 1/1 at 15:03, 15:04 and 16:00. Paimon's tags after
    12:12: {11}; after 13:00: {11, 12}; after 15:00 and at the end: {12, 13, 14} and {13, 14, 15}.
    DIFFERENCE, on purpose (which snapshot a periodic tag holds): hour 11 ended before the first
    snapshot, so we do not tag it; hour h holds the last snapshot before (h+1):00 (12 -> the 12:59
    snapshot, 2), where Paimon uses the first one after it (12 -> the 13:00 snapshot, 3). From 15:00 on
    the names are Paimon's; the tags outlive their expired snapshots."""
    s = Scenario(tmp_path / "t", options={"tag.creation-period": "hourly", "tag.num-retained-max": "3"})
    commit_and_tag(s, "2023-07-18T12:12:00")
    assert tags_of(s) == {}
    commit_and_tag(s, "2023-07-18T12:59:00")
    assert tags_of(s) == {}
    commit_and_tag(s, "2023-07-18T13:00:00")  # just in time: hour 12 is complete
    assert tags_of(s) == {"2023-07-18 12": 2}
    commit_and_tag(s, "2023-07-18T14:00:00")
    commit_and_tag(s, "2023-07-18T15:00:00")
    assert tags_of(s) == {"2023-07-18 12": 2, "2023-07-18 13": 3, "2023-07-18 14": 4}
    commit_and_tag(s, "2023-07-18T15:01:00")
    commit_and_tag(s, "2023-07-18T15:02:00")
    for at in ("2023-07-18T15:03:00", "2023-07-18T15:04:00", "2023-07-18T16:00:00"):
        commit_and_tag(s, at)
        s.table.expire_snapshots(retain_min=1, retain_max=1)
    assert tags_of(s) == {"2023-07-18 13": 3, "2023-07-18 14": 4, "2023-07-18 15": 9}
    assert s.snapshot_ids() == [10]
    s.check()


def test_creation_delay_postpones_the_tag_to_the_second(tmp_path):
    """Paimon TagAutoManagerTest#testTagDelay: hourly, delay 10 s. At 13:00:09 hour 12 is not tagged yet,
    at 13:00:10 it is (Paimon, likewise). DIFFERENCE, on purpose: Paimon's first commit (12:00:09)
    tags hour 11 on itself; we tag no hour that ended before the first snapshot, and hour 12 holds the
    12:00:09 snapshot (1), the last before 13:00."""
    s = Scenario(tmp_path / "t", options={"tag.creation-period": "hourly", "tag.creation-delay": "10 s"})
    commit_and_tag(s, "2023-07-18T12:00:09")
    assert tags_of(s) == {}
    commit_and_tag(s, "2023-07-18T13:00:09")
    assert tags_of(s) == {}
    commit_and_tag(s, "2023-07-18T13:00:10")
    assert tags_of(s) == {"2023-07-18 12": 1}
    s.check()


@pytest.mark.parametrize(
    "options, steps",
    [
        pytest.param(
            {"tag.creation-period": "two-hours"},
            [("2023-07-18T12:00:01", {}), ("2023-07-18T13:00:01", {}), ("2023-07-18T14:00:09", {"2023-07-18 12": 2})],
            id="testTagTwoHour",
        ),
        pytest.param(
            {"tag.creation-period": "daily"},
            [
                ("2023-07-18T12:00:01", {}),
                ("2023-07-19T12:00:01", {"2023-07-18": 1}),
                ("2023-07-20T12:00:01", {"2023-07-18": 1, "2023-07-19": 2}),
            ],
            id="testTagDaily",
        ),
        pytest.param(
            {"tag.creation-period": "daily", "tag.period-formatter": "without_dashes"},
            [("2023-07-18T12:12:00", {}), ("2023-07-19T12:12:00", {"20230718": 1})],
            id="testTagDatePeriodFormatter",
        ),
        pytest.param(
            {"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes"},
            [("2023-07-18T12:12:00", {}), ("2023-07-18T13:13:00", {"20230718 12": 1})],
            id="testTagHourlyPeriodFormatter",
        ),
        pytest.param(
            {"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes_and_spaces"},
            [("2023-07-18T12:12:00", {}), ("2023-07-18T13:13:00", {"2023071812": 1})],
            id="testTagHourlyPeriodFormatterWithoutDashesAndSpaces",
        ),
    ],
)
def test_period_lengths_and_name_formats(tmp_path, options, steps):
    """Paimon TagAutoManagerTest#testTagTwoHour, #testTagDaily, #testTagDatePeriodFormatter,
    #testTagHourlyPeriodFormatter, #testTagHourlyPeriodFormatterWithoutDashesAndSpaces: a period is tagged
    by the first run after it ends, named after its start in the configured format ("2023-07-18 12",
    "2023-07-18", "20230718", "20230718 12", "2023071812"). DIFFERENCE, on purpose: Paimon's first commit
    also tags the period before it (on itself); we do not, and a period's tag holds the last snapshot
    before its end instead of the first one after it."""
    s = Scenario(tmp_path / "t", options=options)
    for at, expected in steps:
        commit_and_tag(s, at)
        assert tags_of(s) == expected, at
    s.check()


def test_tag_retention_prunes_only_periodic_tags(tmp_path):
    """Paimon TagAutoManagerTest#testSavepointTag and #testOnlyExpireAutoCreatedTag: hourly, at most 3
    automatic tags, a manual tag "savepoint-11" on snapshot 1; commits at 14:00, 15:00, 16:00 end, as in
    Paimon, with {savepoint-11, 13, 14, 15}; one more hour (17:00) prunes the oldest automatic tag (13),
    never the manual one. (Paimon's extra first tag "11" is the difference described in the module
    docstring; it is what Paimon prunes at 16:00.)"""
    s = Scenario(tmp_path / "t", options={"tag.creation-period": "hourly", "tag.num-retained-max": "3"})
    commit_and_tag(s, "2023-07-18T12:12:00")
    s.table.create_tag("savepoint-11", 1)
    commit_and_tag(s, "2023-07-18T14:00:00")  # only the newest complete hour (13) is tagged
    assert tags_of(s) == {"savepoint-11": 1, "2023-07-18 13": 1}
    commit_and_tag(s, "2023-07-18T15:00:00")
    commit_and_tag(s, "2023-07-18T16:00:00")
    assert tags_of(s) == {"savepoint-11": 1, "2023-07-18 13": 1, "2023-07-18 14": 2, "2023-07-18 15": 3}
    commit_and_tag(s, "2023-07-18T17:00:00")
    assert tags_of(s) == {"savepoint-11": 1, "2023-07-18 14": 2, "2023-07-18 15": 3, "2023-07-18 16": 4}
    s.check()


def test_tags_expire_by_time_retained_automatic_and_manual_alike(tmp_path):
    """Paimon TagAutoManagerTest#testExpireTagsByTimeRetained and
    #testAutoCreateTagNotExpiredByTimeRetained: hourly, at most 3, default time retained 500 ms;
    automatic tags from commits at 12:12, 14:00, 15:12, 16:00, plus a manual tag retained 500 ms and one
    retained 1 day; at 19:00 the new tag 18 is made and the tag expiry leaves exactly
    {2023-07-18 18, the 1-day manual tag}."""
    s = Scenario(
        tmp_path / "t",
        options={"tag.creation-period": "hourly", "tag.num-retained-max": "3", "tag.default-time-retained": "500 ms"},
    )
    for at in ("2023-07-18T12:12:00", "2023-07-18T14:00:00", "2023-07-18T15:12:00", "2023-07-18T16:00:00"):
        commit_and_tag(s, at)
    s.table.create_tag("non-auto-create-tag-shoule-expire", time_retained="500 ms")
    s.table.create_tag("non-auto-create-tag-shoule-not-expire", time_retained="1 d")
    commit_and_tag(s, "2023-07-18T19:00:00")
    s.table.expire_tags(now=utc("2023-07-18T19:00:00"))
    assert set(tags_of(s)) == {"2023-07-18 18", "non-auto-create-tag-shoule-not-expire"}
    s.check()


def test_catch_up_tags_every_missed_period_in_one_run(tmp_path):
    """Paimon TagAutoManagerTest#testAutoCompleteTags: hourly, tag.automatic-completion; a commit at
    16:12, then (after the job was down) at 18:05 and 18:10. Paimon ends with {15, 16, 17}, adding one
    missed hour per commit, each on the committing snapshot. DIFFERENCE, on purpose: ``catch_up`` tags
    every missed hour in one run, each with the state at its end (16 and 17 both hold snapshot 1, the
    table did not change in between); hour 15 ended before the first snapshot and is not tagged."""
    s = Scenario(tmp_path / "t", options={"tag.creation-period": "hourly", "tag.num-retained-max": "3"})
    commit_and_tag(s, "2024-06-26T16:12:00", catch_up=True)
    assert tags_of(s) == {}
    commit_and_tag(s, "2024-06-26T18:05:00", catch_up=True)
    assert tags_of(s) == {"2024-06-26 16": 1, "2024-06-26 17": 1}
    commit_and_tag(s, "2024-06-26T18:10:00", catch_up=True)
    assert tags_of(s) == {"2024-06-26 16": 1, "2024-06-26 17": 1}
    s.check()


def test_catch_up_resumes_after_the_newest_periodic_tag(tmp_path):
    """Paimon TagAutoManagerTest#testAutoCompleteTags with retention (at most 1), and TagAutoCreation's
    restart rule: progress resumes at the period after the newest automatic tag (Paimon reads it from
    that tag's name). Commit at 16:12; at 19:05 catch-up tags hours 16, 17 and 18 (all holding snapshot
    1) and retention keeps 18; the next run at 19:10 has nothing to do: hours 16 and 17 lie before the
    newest tag and must not be tagged (and pruned) again."""
    s = Scenario(tmp_path / "t", options={"tag.creation-period": "hourly", "tag.num-retained-max": "1"})
    commit_and_tag(s, "2024-06-26T16:12:00", catch_up=True)
    s.add(0, at=utc("2024-06-26T19:05:00"))
    first = s.table.create_periodic_tags(now=utc("2024-06-26T19:05:00"), catch_up=True)
    assert (first.created, first.deleted) == (["2024-06-26 16", "2024-06-26 17", "2024-06-26 18"], ["2024-06-26 16", "2024-06-26 17"])
    assert tags_of(s) == {"2024-06-26 18": 1}
    s.add(0, at=utc("2024-06-26T19:10:00"))
    again = s.table.create_periodic_tags(now=utc("2024-06-26T19:10:00"), catch_up=True)
    assert (again.created, again.deleted) == ([], [])
    assert tags_of(s) == {"2024-06-26 18": 1}
    s.check()


def test_manual_tag_with_a_periodic_name_is_allowed_and_never_pruned(tmp_path):
    """Paimon TagAutoManagerTest#testMultiAutoTagsOnOneSnapshot: daily; a manual tag named like an
    automatic one ("2023-07-18") on a snapshot is an error in Paimon, which tells automatic tags by their
    names. DIFFERENCE, on purpose: a tag records its source, so the manual tag is allowed; the periodic
    run leaves that period's name alone, and retention (at most 1) never deletes the manual tag."""
    s = Scenario(tmp_path / "t", options={"tag.creation-period": "daily", "tag.num-retained-max": "1"})
    commit_and_tag(s, "2023-07-18T12:00:01")
    s.table.create_tag("2023-07-18", 1)
    commit_and_tag(s, "2023-07-19T12:00:01")
    assert tags_of(s) == {"2023-07-18": 1}
    assert Table.open(s.uri).tag("2023-07-18").source == "manual"
    commit_and_tag(s, "2023-07-20T12:00:01")
    assert tags_of(s) == {"2023-07-18": 1, "2023-07-19": 2}
    s.check()


# -- LocalOrphanFilesCleanTest ---------------------------------------------------------------------


def age(root: str, directory: str, seconds: int) -> None:
    """Set every file under ``root/directory`` back ``seconds`` in time."""
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(os.path.join(root, directory)):
        for name in files:
            os.utime(os.path.join(dirpath, name), (past, past))


def write(root: str, rel: str, data: bytes = b"stray") -> str:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return rel


def test_orphan_clean_deletes_exactly_the_strays_after_expiry_and_tag_deletion(tmp_path):
    """Paimon LocalOrphanFilesCleanTest#normallyRemoving (#testNormallyRemoving): a history with tags,
    some snapshots expired and some tags deleted, plus stray files in the data and manifest directories
    (manifest-list-*, manifest-*, UNKNOWN-*); the default 1-day window deletes nothing; once the files
    are old, exactly the strays are deleted and every snapshot and tag still reads its state.
    DIFFERENCES, on purpose: Paimon ages the files by passing "now + 2 s" as the cut-off, which we
    refuse (a window ending in the future could delete files being written now), so the test ages the
    files instead; and Paimon also deletes unknown files in snapshot/ (and changelog/), where we delete
    only leftovers of our own temp writes: snapshot/UNKNOWN-* stays."""
    s = Scenario(tmp_path / "t")
    mixed_history(s, 12)
    for snapshot_id in (2, 5, 6, 9, 11):  # Paimon: each snapshot tagged at random
        s.table.create_tag(f"tag{snapshot_id}", snapshot_id)
    s.table.expire_snapshots(retain_min=8, retain_max=8, limit=12, time_retained=NEVER)  # Paimon: 1 to n/2 at random
    for name in ("tag5", "tag9"):  # Paimon: a random pick
        s.table.delete_tag(name)
    strays = sorted([
        write(s.uri, "data/p=0/data-stray.parquet"),
        write(s.uri, "data/p=7/data-stray.parquet"),
        write(s.uri, "manifest/manifest-list-stray"),
        write(s.uri, "manifest/manifest-stray"),
        write(s.uri, "manifest/UNKNOWN-stray"),
    ])
    unknown_metadata = write(s.uri, "snapshot/UNKNOWN-stray")
    now = int(time.time() * 1000)
    table = Table.open(s.uri)
    assert table.remove_orphan_files(dry_run=False, now=now).orphan_files == []
    with pytest.raises(InvalidArgumentError):
        table.remove_orphan_files(older_than=now + 2000, dry_run=False, now=now)
    for directory in ("data", "manifest", "snapshot"):
        age(s.uri, directory, 2 * DAY_SECONDS)
    result = table.remove_orphan_files(dry_run=False, now=now)
    assert sorted(result.orphan_files) == strays
    assert not any(s.exists(rel) for rel in strays)
    assert s.exists(unknown_metadata)
    assert s.tag_names() == {"tag2", "tag6", "tag11"}
    s.check()


def test_orphan_clean_with_a_missing_manifest_deletes_nothing(tmp_path):
    """Paimon LocalOrphanFilesCleanTest#testAbnormallyRemoving: a manifest of snapshot 1 is deleted (as
    if expired while cleaning); Paimon carries on and still deletes files. DIFFERENCE, on purpose (fail
    closed): we cannot build the set of files in use, so the run aborts and deletes nothing, not even an
    old stray."""
    s = Scenario(tmp_path / "t")
    for i in range(3):
        s.add(i % 3)
    first = s.table.snapshot(1)
    lists = {first.base_manifest_list, first.delta_manifest_list}
    manifest = sorted(manifest_refs(s.table, first) - {f"manifest/{name}" for name in lists})[0]
    os.remove(os.path.join(s.uri, manifest))
    stray = write(s.uri, "data/p=0/data-stray.parquet")
    age(s.uri, "data", 2 * DAY_SECONDS)
    age(s.uri, "manifest", 2 * DAY_SECONDS)
    before = files_under(s.table, "data") + files_under(s.table, "manifest")
    with pytest.raises(CorruptMetadataError):
        Table.open(s.uri).remove_orphan_files(dry_run=False, now=int(time.time() * 1000))
    assert files_under(s.table, "data") + files_under(s.table, "manifest") == before
    assert s.exists(stray)


def test_directory_in_the_snapshot_directory_is_not_an_orphan(tmp_path):
    """Paimon LocalOrphanFilesCleanTest#testDirectoryInSnapshotDirNotTreatedAsCandidate: an old, unknown
    directory under snapshot/ is neither deleted nor reported, and the table still lists its snapshots."""
    s = Scenario(tmp_path / "t")
    s.add(0)
    stale_dir = os.path.join(s.uri, "snapshot", "UNKNOWN-stale-dir")
    os.makedirs(stale_dir)
    past = time.time() - 2 * DAY_SECONDS
    os.utime(stale_dir, (past, past))
    now = int(time.time() * 1000)
    result = Table.open(s.uri).remove_orphan_files(older_than=now, dry_run=False, now=now)
    assert not any("UNKNOWN-stale-dir" in rel for rel in result.orphan_files)
    assert os.path.isdir(stale_dir)
    assert s.snapshot_ids() == [1]
    s.check()
