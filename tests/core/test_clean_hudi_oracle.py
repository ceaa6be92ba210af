"""Random histories: clean() against Hudi's CleanPlanner rules, written out here file version by file version.

The mapping (docs/lifecycle.md): a file group is a partition, and its versions are the file sets
it has, a new one at each commit that changes it. A partition left without files is a replaced
file group; written again later, it is a new file group. On those versions the oracle applies
Hudi's rules (CleanPlanner, CleanerUtils.getEarliestCommitToRetain):

- KEEP_LATEST_COMMITS N: with more than N commits, the N-th newest is the earliest commit to
  retain (ECTR). KEEP_LATEST_BY_HOURS H: the first commit at or after now - H (none: no clean).
  Then: a file group replaced before the ECTR goes whole; one replaced at or after it stays whole
  (it is neither replaced before the ECTR nor an active file group); an active file group loses
  its versions that begin before the ECTR, except the last of them and its latest.
- KEEP_LATEST_FILE_VERSIONS N: replaced file groups go whole; active ones keep their N newest.
- A savepointed file is never cleaned.

A file goes when every version holding it goes. Our clean may only differ from that where
docs/lifecycle.md says so, and the checks below hold each difference to exactly what it says:
under the commit policies we delete more only from file groups replaced at or after the ECTR
(their versions no state from the one before the ECTR reads); under KEEP_LATEST_FILE_VERSIONS
we never delete what Hudi keeps, keep every live partition's N newest versions readable, and
expire every snapshot those versions do not need.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field

import pytest

from airflow_snaptable.core import Table
from tests.conftest import SCHEMA, make_rows, sorted_ids

HOUR = 3_600_000
MINUTE = 60_000
PARTITIONS = 3
POLICIES = ("KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS", "KEEP_LATEST_FILE_VERSIONS")
PARAMETER = {"KEEP_LATEST_COMMITS": "commits_retained", "KEEP_LATEST_BY_HOURS": "hours_retained",
             "KEEP_LATEST_FILE_VERSIONS": "file_versions_retained"}


@dataclass
class FileGroup:
    """A partition's run of non-empty file sets: ``versions`` as (first snapshot, files)."""

    partition: int
    versions: list[tuple[int, frozenset[str]]] = field(default_factory=list)
    #: The snapshot that left the partition empty (Hudi: the replace commit); None: live at the end.
    replaced_at: int | None = None

    def files(self, versions=None) -> set[str]:
        return set().union(*(files for _, files in (self.versions if versions is None else versions)))

    def ends(self, latest: int) -> list[int]:
        """Each version's first snapshot after it (the state that no longer reads it)."""
        return [start for start, _ in self.versions[1:]] + [self.replaced_at or latest + 1]


def file_groups(states: dict[int, dict[int, frozenset[str]]], first: int, last: int) -> list[FileGroup]:
    """The file groups of snapshots ``first..last`` (a partition present at ``first`` has a version from then)."""
    groups: list[FileGroup] = []
    for partition in range(PARTITIONS):
        current: FileGroup | None = None
        for snapshot_id in range(first, last + 1):
            files = states[snapshot_id].get(partition, frozenset())
            if current is not None and not files:
                current.replaced_at, current = snapshot_id, None
            elif files and current is None:
                current = FileGroup(partition, [(snapshot_id, files)])
                groups.append(current)
            elif files and files != current.versions[-1][1]:
                current.versions.append((snapshot_id, files))
    return groups


def earliest_commit_to_retain(policy: str, value: int, latest: int, times: dict[int, int], now: int) -> int | None:
    if policy == "KEEP_LATEST_COMMITS":
        return latest - value + 1 if latest > value else None
    if policy == "KEEP_LATEST_BY_HOURS":
        return next((i for i in range(1, latest + 1) if times[i] >= now - value * HOUR), None)
    return None


def hudi_cleans(groups: list[FileGroup], policy: str, value: int, ectr: int | None) -> set[str]:
    """The files Hudi's clean deletes (before savepoints are taken out)."""
    gone, kept = [], []
    for group in groups:
        if policy == "KEEP_LATEST_FILE_VERSIONS":
            if group.replaced_at is not None:
                gone += group.versions
            else:
                kept += group.versions[-value:]
                gone += group.versions[:-value]
        elif ectr is None or (group.replaced_at is not None and group.replaced_at >= ectr):
            kept += group.versions
        elif group.replaced_at is not None:
            gone += group.versions
        else:
            before = [v for v in group.versions if v[0] < ectr]
            gone += before[:-1]
            kept += [v for v in group.versions if v not in before[:-1]]
    return set().union(*(f for _, f in gone)) - set().union(*(f for _, f in kept))


class History:
    """A real table and, per snapshot, its rows and each partition's files, as written."""

    def __init__(self, path, rng: random.Random, start_millis: int):
        self.table = Table.create(str(path), SCHEMA, partition_by=["p"])
        self.rng = rng
        self.when = start_millis
        self.states: dict[int, dict[int, frozenset[str]]] = {}
        self.rows: dict[int, list[int]] = {}
        self.times: dict[int, int] = {}
        self.next_id = 0
        self.written: set[str] = set()

    def fresh_rows(self, partitions: list[int]):
        ids = []
        for partition in partitions:
            ids += [3 * (self.next_id + k) + partition for k in range(2)]
        self.next_id += 2
        return make_rows(ids)

    def commit_random(self) -> None:
        present = sorted({p for p, files in self.states.get(self.latest(), {}).items() if files})
        kind = self.rng.choices(["append", "overwrite", "delete", "compact"], [3, 3, 1.5, 1])[0]
        chosen = sorted(self.rng.sample(range(PARTITIONS), self.rng.randint(1, 2)))
        self.when += self.rng.randint(10, 120) * MINUTE
        self.table.clock = lambda when=self.when: when
        snapshot = None
        if kind == "delete" and present:
            snapshot = self.table.delete([{"p": p} for p in self.rng.sample(present, 1)])
        elif kind == "compact" and present:
            snapshot = self.table.compact(min_file_num=2)
        elif kind == "overwrite":
            snapshot = self.table.overwrite(self.fresh_rows(chosen), partitions=[{"p": p} for p in chosen])
        if snapshot is None:
            snapshot = self.table.append(self.fresh_rows(chosen))
        self.record(snapshot.id)

    def record(self, snapshot_id: int) -> None:
        by_partition: dict[int, set[str]] = {}
        for data_file in self.table.scan(snapshot_id=snapshot_id).files():
            by_partition.setdefault(data_file.partition[0], set()).add(data_file.path)
        self.states[snapshot_id] = {p: frozenset(files) for p, files in by_partition.items()}
        self.written |= set().union(*by_partition.values()) if by_partition else set()
        self.rows[snapshot_id] = sorted_ids(self.table.scan(snapshot_id=snapshot_id).to_arrow())
        self.times[snapshot_id] = self.when

    def latest(self) -> int:
        return max(self.states, default=0)

    def state_files(self, snapshot_ids) -> set[str]:
        return set().union(*(f for i in snapshot_ids for f in self.states[i].values()))

    def on_disk(self) -> set[str]:
        root = self.table.uri
        return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(os.path.join(root, "data")) for f in fs}


def check_clean(history: History, policy: str, value: int, savepoints: list[int], cleaned: dict) -> None:
    """One clean of ``history``'s table, judged against the oracle; ``cleaned`` accumulates over cleans."""
    table = history.table
    latest = history.latest()
    earliest_before = table.earliest_snapshot().id
    now = history.when + history.rng.randint(0, 90) * MINUTE
    table.clock = lambda: now
    result = table.clean(policy, **{PARAMETER[policy]: value})
    retained = [s.id for s in Table.open(table.uri).snapshots()]
    earliest = retained[0]
    context = (policy, value, savepoints, earliest_before, latest, history.states)

    # Our model: every retained snapshot and savepoint reads as written, and nothing else is left.
    assert retained == list(range(earliest, latest + 1)), context
    for snapshot_id in retained + savepoints:
        assert sorted_ids(table.scan(snapshot_id=snapshot_id).to_arrow() if snapshot_id in retained
                          else table.scan(tag=f"savepoint-{snapshot_id}").to_arrow()) == history.rows[snapshot_id], context
    held = history.state_files(savepoints)
    assert history.on_disk() == history.state_files(retained) | held, context
    assert result.earliest_commit_retained == earliest

    ectr = earliest_commit_to_retain(policy, value, latest, history.times, now)
    assert result.earliest_commit_to_retain == ectr, context
    groups = file_groups(history.states, 1, latest)
    cleaned["hudi"] |= hudi_cleans(groups, policy, value, ectr) - held
    ours = history.written - history.on_disk()
    if policy != "KEEP_LATEST_FILE_VERSIONS":
        assert earliest == (earliest_before if ectr is None else max(earliest_before, ectr - 1)), context
        if ectr is not None:
            cleaned["early"] |= set().union(*(g.files() for g in groups if g.replaced_at is not None and g.replaced_at >= ectr))
        # Hudi's deletions happen; the only ones added are of file groups replaced at or after the ECTR.
        assert cleaned["hudi"] <= ours, context
        assert ours - cleaned["hudi"] <= cleaned["early"], context
        return
    # Never delete what Hudi keeps.
    assert ours <= cleaned["hudi"], context
    # Each live partition keeps its N newest versions readable (all, when fewer), and one more
    # expired snapshot would cost one of them: the clean goes as far as the snapshot model allows.
    live = [g for g in file_groups(history.states, earliest_before, latest) if g.replaced_at is None]

    def keeps_enough(first_kept: int) -> bool:
        return all(sum(end > first_kept for end in g.ends(latest)) >= min(value, len(g.versions)) for g in live)

    assert keeps_enough(earliest), context
    assert earliest == latest or not keeps_enough(earliest + 1), context


@pytest.mark.parametrize("policy", POLICIES)
def test_random_histories_clean_as_hudi_does(tmp_path, policy):
    """Two cleans per history (more commits between them), a savepoint in some."""
    rng = random.Random(f"hudi-clean-{policy}")
    start = int(time.time() * 1000) - 30 * HOUR  # in the past: verify() refuses snapshots from the future
    for case in range(12):
        history = History(tmp_path / f"t{case}", rng, start)
        for _ in range(rng.randint(3, 7)):
            history.commit_random()
        savepoints = []
        if rng.random() < 0.4:
            savepoints.append(rng.randint(1, history.latest()))
            history.table.create_savepoint(savepoints[0])
        cleaned = {"hudi": set(), "early": set()}
        check_clean(history, policy, rng.randint(1, 4), savepoints, cleaned)
        for _ in range(rng.randint(1, 4)):
            history.commit_random()
        check_clean(history, policy, rng.randint(1, 4), savepoints, cleaned)
        assert history.table.verify().ok
