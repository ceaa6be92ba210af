"""Apache Paimon's TagAutoManagerTest and ConsumerManagerTest, ported onto tables pypaimon writes.

tests/core/test_ported_paimon_tags_orphans.py and tests/core/test_ported_paimon.py port the same Java
tests onto our own format. Here pypaimon (Apache Paimon's Python client) writes the tables, with the
Java tests' commit times (``"at"``, tests/paimon/pypaimon_client.py), the table options go into the
Paimon schema as a Flink or Spark job would set them, and pypaimon is the judge: it reads every tag
we create with the rows its snapshot had, the files left are exactly what the retained snapshots
and tags use, and its ConsumerManager reads the consumers we write (and we honour the ones it
writes, as a Flink streaming reader's).

Translation (as in the core ports): Paimon creates automatic tags while committing; here each
commit is followed by ``create_periodic_tags(now=<commit time>)``. Where no expiry runs between
commits, pypaimon makes all the commits in one call and the tag runs follow in commit order: a
periodic run at time ``t`` reads only snapshots committed before a period that ended by ``t``, so
the later commits do not change what it does. The differences from Paimon named in the core ports
hold here too (a period's tag holds the last snapshot before its end; a period that ended before the
first snapshot is not tagged). One difference does not: a Paimon tag records no source, so on a
Paimon table a tag whose name is the table's own period pattern is an automatic tag, as Paimon tells them apart.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.native.tags import MANUAL, PERIODIC
from tests.paimon.conftest import run_client, table_files

pytestmark = pytest.mark.slow

COLUMNS = [["p", "string"], ["id", "int64"], ["v", "string"]]


def utc(text: str) -> int:
    """Epoch millis of an ISO time read as UTC (Paimon's ``utcMills``)."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


class PaimonScenario:
    """One pypaimon table (append, bucket -1, partitioned by ``p``) with commits at chosen times.

    ``before`` keeps what pypaimon read for every snapshot right after committing it (rows and the
    files it reads), so the checks compare with Paimon's own reading from before our operations.
    """

    def __init__(self, python: str, warehouse: str, name: str, options: dict, commits: list[str] | None = None):
        self.python = python
        self.warehouse = warehouse
        self.name = name
        self.full = f"db.{name}"
        self.before: dict[str, dict] = {}
        self.times: list[int] = []
        create = {"create": self.full, "columns": COLUMNS, "partition": ["p"], "options": {"bucket": "-1", **options}}
        self._run([create], commits or [])

    @property
    def root(self) -> str:
        return os.path.join(self.warehouse, "db.db", self.name)

    def table(self) -> Table:
        return Table.open(self.root)

    def commit(self, *times: str) -> None:
        """pypaimon commits once at each time (one call), then reads every snapshot."""
        self._run([], list(times))

    def _run(self, steps: list, times: list[str]) -> None:
        for at in times:
            n = len(self.times) + 1
            self.times.append(utc(at))
            steps.append({"write": self.full, "rows": [[f"p{n % 2}", n, f"at {at}"]], "at": utc(at)})
        read = run_client(self.python, self.warehouse, steps + [{"read": self.full}])[self.full]
        for key, snapshot in read["snapshots"].items():
            assert "error" not in snapshot, snapshot
            self.before.setdefault(key, snapshot)

    def tags(self) -> dict[str, int]:
        return {t.name: t.snapshot_id for t in self.table().tags()}

    def check(self) -> dict:
        """pypaimon reads every snapshot and tag left; each reads as its snapshot did right after its commit,
        and the data and manifest files left are exactly the ones those reads used then."""
        after = run_client(self.python, self.warehouse, [{"read": self.full}])[self.full]
        ours = self.tags()
        assert sorted(after["tags"]) == sorted(ours)
        expected_files = set()
        for key, read in after["snapshots"].items():
            assert "error" not in read, read
            assert read["rows"] == self.before[key]["rows"], f"snapshot {key}"
            expected_files |= set(self.before[key]["files"])
        for name, read in after["tags"].items():
            assert "error" not in read, f"tag {name}: {read}"
            tagged = self.before[str(ours[name])]
            assert read["rows"] == tagged["rows"], f"tag {name}"
            expected_files |= set(tagged["files"])
        assert table_files(self.root) == expected_files
        return after


def commit_and_tag(s: PaimonScenario, at: str, **periodic) -> None:
    s.commit(at)
    s.table().create_periodic_tags(now=utc(at), **periodic)


def tag_runs(s: PaimonScenario, *times: str, **periodic) -> None:
    """The automatic tag run after each of the commits at ``times`` (already committed, in order)."""
    for at in times:
        s.table().create_periodic_tags(now=utc(at), **periodic)


@pytest.fixture
def scenario(paimon, tmp_path):
    """A factory of PaimonScenario tables in this test's own warehouse."""
    warehouse = str(tmp_path / "warehouse")

    def make(options: dict, commits: list[str] | None = None, name: str = "t") -> PaimonScenario:
        return PaimonScenario(paimon.python, warehouse, name, options, commits)

    return make


# -- TagAutoManagerTest --------------------------------------------------------------------------


def test_hourly_tags_with_retention_and_snapshot_expiry(scenario):
    """TagAutoManagerTest#testTag: hourly tags, at most 3; commits at 12:12, 12:59, 13:00, 14:00, 15:00,
    15:01, 15:02, then with expiry (retain 1/1) after 15:03, 15:04 and 16:00. The tags outlive the
    snapshots they hold; pypaimon reads each with its snapshot's rows."""
    first = ["2023-07-18T12:12:00", "2023-07-18T12:59:00", "2023-07-18T13:00:00", "2023-07-18T14:00:00",
             "2023-07-18T15:00:00", "2023-07-18T15:01:00", "2023-07-18T15:02:00"]
    s = scenario({"tag.creation-period": "hourly", "tag.num-retained-max": "3"}, first)
    tag_runs(s, *first[:2])
    assert s.tags() == {}
    tag_runs(s, first[2])
    assert s.tags() == {"2023-07-18 12": 2}
    tag_runs(s, *first[3:5])
    assert s.tags() == {"2023-07-18 12": 2, "2023-07-18 13": 3, "2023-07-18 14": 4}
    tag_runs(s, *first[5:])
    for at in ("2023-07-18T15:03:00", "2023-07-18T15:04:00", "2023-07-18T16:00:00"):
        commit_and_tag(s, at)
        s.table().expire_snapshots(retain_min=1, retain_max=1)
    assert s.tags() == {"2023-07-18 13": 3, "2023-07-18 14": 4, "2023-07-18 15": 9}
    assert all(t.source == PERIODIC for t in s.table().tags())
    after = s.check()
    assert sorted(after["snapshots"]) == ["10"]


def test_creation_delay_postpones_the_tag(scenario):
    """TagAutoManagerTest#testTagDelay: hourly, delay 10 s: at 13:00:09 hour 12 is not tagged, at 13:00:10 it is."""
    times = ["2023-07-18T12:00:09", "2023-07-18T13:00:09", "2023-07-18T13:00:10"]
    s = scenario({"tag.creation-period": "hourly", "tag.creation-delay": "10 s"}, times)
    tag_runs(s, *times[:2])
    assert s.tags() == {}
    tag_runs(s, times[2])
    assert s.tags() == {"2023-07-18 12": 1}
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
            {"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes_and_spaces"},
            [("2023-07-18T12:12:00", {}), ("2023-07-18T13:13:00", {"2023071812": 1})],
            id="testTagHourlyPeriodFormatterWithoutDashesAndSpaces",
        ),
    ],
)
def test_period_lengths_and_name_formats(scenario, options, steps):
    """TagAutoManagerTest#testTagTwoHour, #testTagDaily, #testTagHourlyPeriodFormatterWithoutDashesAndSpaces:
    the options come from the Paimon table's schema; each period is tagged by the first run after it ends."""
    s = scenario(options, [at for at, _ in steps])
    for at, expected in steps:
        tag_runs(s, at)
        assert s.tags() == expected, at
    s.check()


def test_retention_prunes_automatic_tags_and_keeps_a_savepoint(scenario):
    """TagAutoManagerTest#testSavepointTag / #testOnlyExpireAutoCreatedTag: hourly, at most 3 automatic tags;
    a manual tag "savepoint-11" on snapshot 1 is never pruned; the fifth hour prunes the oldest automatic tag."""
    times = ["2023-07-18T12:12:00", "2023-07-18T14:00:00", "2023-07-18T15:00:00", "2023-07-18T16:00:00",
             "2023-07-18T17:00:00"]
    s = scenario({"tag.creation-period": "hourly", "tag.num-retained-max": "3"}, times)
    tag_runs(s, times[0])
    s.table().create_tag("savepoint-11", 1)
    tag_runs(s, times[1])
    assert s.tags() == {"savepoint-11": 1, "2023-07-18 13": 1}
    tag_runs(s, *times[2:4])
    assert s.tags() == {"savepoint-11": 1, "2023-07-18 13": 1, "2023-07-18 14": 2, "2023-07-18 15": 3}
    tag_runs(s, times[4])
    assert s.tags() == {"savepoint-11": 1, "2023-07-18 14": 2, "2023-07-18 15": 3, "2023-07-18 16": 4}
    assert s.table().tag("savepoint-11").source == MANUAL
    s.check()


def test_tags_expire_by_time_retained_automatic_and_manual_alike(scenario):
    """TagAutoManagerTest#testExpireTagsByTimeRetained: hourly, at most 3, default time retained 500 ms
    (written into each Paimon tag file as tagTimeRetained); a manual tag retained 500 ms and one retained
    1 day; at 19:00 tag 18 is made, and expiring tags leaves exactly {18, the 1-day tag}."""
    times = ["2023-07-18T12:12:00", "2023-07-18T14:00:00", "2023-07-18T15:12:00", "2023-07-18T16:00:00",
             "2023-07-18T19:00:00"]
    s = scenario({"tag.creation-period": "hourly", "tag.num-retained-max": "3", "tag.default-time-retained": "500 ms"}, times)
    tag_runs(s, *times[:4])
    table = s.table()
    table.clock = lambda: utc(times[3]) + 1000  # the manual tags are created between the commits, as in Java
    table.create_tag("non-auto-create-tag-shoule-expire", 4, time_retained="500 ms")
    table.create_tag("non-auto-create-tag-shoule-not-expire", 4, time_retained="1 d")
    tag_runs(s, times[4])
    s.table().expire_tags(now=utc(times[4]))
    assert set(s.tags()) == {"2023-07-18 18", "non-auto-create-tag-shoule-not-expire"}
    s.check()


def test_catch_up_tags_every_missed_period_in_one_run(scenario):
    """TagAutoManagerTest#testAutoCompleteTags: hourly, at most 3; a commit at 16:12, then (the job was down)
    18:05 and 18:10: one catch-up run tags the missed hours 16 and 17, each with the state at its end."""
    times = ["2024-06-26T16:12:00", "2024-06-26T18:05:00", "2024-06-26T18:10:00"]
    s = scenario({"tag.creation-period": "hourly", "tag.num-retained-max": "3"}, times)
    tag_runs(s, times[0], catch_up=True)
    assert s.tags() == {}
    tag_runs(s, times[1], catch_up=True)
    assert s.tags() == {"2024-06-26 16": 1, "2024-06-26 17": 1}
    tag_runs(s, times[2], catch_up=True)
    assert s.tags() == {"2024-06-26 16": 1, "2024-06-26 17": 1}
    s.check()


def test_a_period_named_tag_is_automatic_on_a_paimon_table(scenario):
    """TagAutoManagerTest#testMultiAutoTagsOnOneSnapshot: daily, at most 1. Paimon tells automatic tags by their
    names, and so do we on a Paimon table (it records no source): a tag named "2023-07-18" counts as the
    automatic tag of that day, the run does not tag the day again, and retention prunes it like any other
    (on our own format a manual tag records its source and is never pruned, tests/core)."""
    times = ["2023-07-18T12:00:01", "2023-07-19T12:00:01", "2023-07-20T12:00:01"]
    s = scenario({"tag.creation-period": "daily", "tag.num-retained-max": "1"}, times)
    tag_runs(s, times[0])
    s.table().create_tag("2023-07-18", 1)
    assert s.table().tag("2023-07-18").source == PERIODIC
    tag_runs(s, times[1])
    assert s.tags() == {"2023-07-18": 1}
    tag_runs(s, times[2])
    assert s.tags() == {"2023-07-19": 2}
    s.check()


# -- ConsumerManagerTest -------------------------------------------------------------------------


def consumers_read_by_pypaimon(s: PaimonScenario) -> dict:
    return run_client(s.python, s.warehouse, [{"consumers": s.full}])[s.full]


def test_consumers_we_write_are_read_by_paimon_and_paimons_hold_our_expiry(scenario):
    """ConsumerManagerTest#test: no consumer at first; id1 at 5 and id2 at 8 read back as written, the minimum
    next snapshot is 5, by pypaimon's ConsumerManager. Then a consumer pypaimon writes (as a Flink streaming
    reader does) holds its snapshots against our expiry, and its deletion releases them."""
    times = [f"2023-07-18T12:0{i}:00" for i in range(8)]
    s = scenario({}, times)
    table = s.table()
    assert table.consumers() == []
    assert consumers_read_by_pypaimon(s) == {"consumers": {}, "min": None}
    table.update_consumer("id1", 5)
    table.update_consumer("id2", 8)
    assert {c.id: c.next_snapshot for c in Table.open(s.root).consumers()} == {"id1": 5, "id2": 8}
    assert consumers_read_by_pypaimon(s) == {"consumers": {"id1": 5, "id2": 8}, "min": 5}
    table.delete_consumer("id1")
    table.delete_consumer("id2")

    run_client(s.python, s.warehouse, [{"consumer": s.full, "id": "flink", "next_snapshot": 6}])
    assert s.table().consumer("flink").next_snapshot == 6
    s.table().expire_snapshots(retain_min=1, time_retained="0 s")
    assert sorted(s.check()["snapshots"], key=int) == ["5", "6", "7", "8"]  # 6 and the base of its next changes
    run_client(s.python, s.warehouse, [{"consumer": s.full, "id": "flink", "next_snapshot": None}])
    s.table().expire_snapshots(retain_min=1, time_retained="0 s")
    assert sorted(s.check()["snapshots"]) == ["8"]


def test_consumers_expire_by_their_files_modification_time(scenario):
    """ConsumerManagerTest#testExpire: Paimon expires a consumer by its file's modification time. id1 written
    by pypaimon two seconds before id2 (ours); expiring at a cut-off between the two removes id1 only, and
    id2 rewritten later survives a later cut-off, for pypaimon's ConsumerManager too."""
    s = scenario({"consumer.expiration-time": "10 s"}, ["2023-07-18T12:00:00", "2023-07-18T12:01:00"])
    run_client(s.python, s.warehouse, [{"consumer": s.full, "id": "id1", "next_snapshot": 1}])
    path1 = os.path.join(s.root, "consumer", "consumer-id1")
    written = time.time() - 60
    os.utime(path1, (written, written))
    s.table().update_consumer("id2", 2)
    os.utime(os.path.join(s.root, "consumer", "consumer-id2"), (written + 2, written + 2))
    cutoff = int((written + 1) * 1000)
    assert s.table().expire_consumers(now=cutoff + 10_000) == ["id1"]
    assert consumers_read_by_pypaimon(s) == {"consumers": {"id2": 2}, "min": 2}
    s.table().update_consumer("id2", 2)  # touched now: newer than any cut-off below
    assert s.table().expire_consumers(now=int((time.time() - 1) * 1000) + 10_000) == []
    assert consumers_read_by_pypaimon(s) == {"consumers": {"id2": 2}, "min": 2}


def test_an_unreadable_consumer_file_fails_closed(scenario):
    """ConsumerManagerTest#testRetry: an empty consumer file is an error (Paimon fails after its retries), not a
    missing consumer, and expiry deletes nothing while it cannot read what the consumer holds."""
    s = scenario({}, ["2023-07-18T12:00:00", "2023-07-18T12:01:00", "2023-07-18T12:02:00"])
    os.makedirs(os.path.join(s.root, "consumer"), exist_ok=True)
    open(os.path.join(s.root, "consumer", "consumer-id1"), "wb").close()
    before = table_files(s.root)
    with pytest.raises(CorruptMetadataError):
        s.table().consumer("id1")
    with pytest.raises(CorruptMetadataError):
        s.table().expire_snapshots(retain_min=1, time_retained="0 s")
    assert table_files(s.root) == before
    os.remove(os.path.join(s.root, "consumer", "consumer-id1"))
    s.check()
