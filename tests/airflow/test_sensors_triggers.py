"""SnapTableNewSnapshotSensor, SnapTableNewSnapshotTrigger and SnapTableSnapshotEventTrigger (state store, restarts, poll cost)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from airflow.sdk.module_loading import import_string

from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, SnapshotNotFoundError, TableNotFoundError
from airflow_snaptable.sensors import SnapTableNewSnapshotSensor
from airflow_snaptable.triggers import SnapTableNewSnapshotTrigger, SnapTableSnapshotEventTrigger
from airflow_snaptable.triggers.snaptable import POSITION_KEY
from tests.airflow.conftest import DummyStateStore, snaptable_conn
from tests.conftest import SCHEMA, make_rows


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = str(tmp_path / "warehouse")
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(root))
    return root


def new_table(root, name="orders", snapshots=3) -> Table:
    table = Table.create(f"{root}/{name}", SCHEMA, partition_by=["p"])
    for i in range(snapshots):
        table.append(make_rows(range(i * 10, i * 10 + 10)))
    return table


# -- sensor ------------------------------------------------------------------------------------


def test_poke_returns_the_new_range(root):
    table = new_table(root)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=1)
    result = sensor.poke({})
    assert result.is_done
    assert result.xcom_value == {
        "table": table.uri,
        "from_snapshot_id": 1,
        "to_snapshot_id": 3,
        "snapshot_ids": [2, 3],
        "commit_kinds": ["APPEND", "APPEND"],
        "matching_snapshot_ids": [2, 3],
        "added_records": 20,
        "deleted_records": 0,
    }
    changes = table.changes(1, 3)
    assert changes.added_record_count == 20
    assert not SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=3).poke({}).is_done


def test_commit_kinds_filter_ignores_compaction(root):
    table = new_table(root)
    table.append(make_rows(range(100, 103), partitions=1))
    table.append(make_rows(range(103, 106), partitions=1))
    assert table.compact(min_file_num=2) is not None  # snapshot 6: COMPACT
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=5)
    assert not sensor.poke({}).is_done
    assert SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=5, commit_kinds=None).poke({}).is_done
    table.delete(partitions=[{"p": 0}])  # snapshot 7
    done = sensor.poke({})
    assert done.is_done
    assert done.xcom_value["snapshot_ids"] == [6, 7]
    assert done.xcom_value["commit_kinds"] == ["COMPACT", "DELETE"]
    assert done.xcom_value["matching_snapshot_ids"] == [7]
    assert done.xcom_value["deleted_records"] > 0


def test_consumer_baseline(root):
    table = new_table(root)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", consumer_id="reader")
    assert sensor.poke({}).xcom_value["from_snapshot_id"] == 0  # a new consumer reads from the start
    table.update_consumer("reader", 3)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", consumer_id="reader")
    assert sensor.poke({}).xcom_value["snapshot_ids"] == [3]
    table.update_consumer("reader", 4)
    assert not SnapTableNewSnapshotSensor(task_id="s", table="orders", consumer_id="reader").poke({}).is_done


def test_expired_history_is_an_error_not_a_silent_skip(root):
    table = new_table(root, snapshots=5)
    table.expire_snapshots(retain_min=2, time_retained="0 s")
    with pytest.raises(SnapshotNotFoundError, match="has expired"):
        SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=1).poke({})
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        SnapTableNewSnapshotSensor(task_id="s", table="orders", consumer_id="late").poke({})


@pytest.mark.parametrize("history", [5, 60])
def test_a_poke_with_nothing_new_costs_o1_storage_operations(root, history):
    table = new_table(root, snapshots=history)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=history)
    assert not sensor.poke({}).is_done  # opens the table
    storage = sensor.hook.get_table("orders").storage
    for _ in range(3):
        storage.reset_counts()
        assert not sensor.poke({}).is_done
        counts = storage.snapshot_counts()
        assert counts["list"] == 0 and counts["write"] == 0 and counts["delete"] == 0
        assert counts["read"] + counts["exists"] <= 4, counts  # LATEST hint + checks, whatever the history
    # Compactions do not fire the sensor and are not read again on every poke.
    table.append(make_rows(range(1000, 1003), partitions=1))
    table.append(make_rows(range(1003, 1006), partitions=1))
    table.compact(min_file_num=2)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=history + 2)
    assert not sensor.poke({}).is_done
    storage = sensor.hook.get_table("orders").storage
    storage.reset_counts()
    assert not sensor.poke({}).is_done
    assert sum(storage.snapshot_counts().values()) <= 4


def test_sensor_arguments_are_checked_when_the_dag_is_parsed():
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        SnapTableNewSnapshotSensor(task_id="s", table="t")
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        SnapTableNewSnapshotSensor(task_id="s", table="t", after_snapshot_id=1, consumer_id="c")
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        SnapTableNewSnapshotSensor(task_id="s", table="t", after_snapshot_id=-1)
    with pytest.raises(InvalidArgumentError, match="unknown commit kind"):
        SnapTableNewSnapshotSensor(task_id="s", table="t", after_snapshot_id=1, commit_kinds=["MERGE"])


def test_poke_and_reschedule_modes_return_the_range(root):
    from unittest import mock

    from airflow.sdk.exceptions import AirflowRescheduleException

    table = new_table(root)
    ti = mock.Mock()
    ti.get_first_reschedule_date.return_value = None
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id="{{ params.after }}", mode="reschedule", poke_interval=30)
    sensor.render_template_fields({"params": {"after": 3}})
    with pytest.raises(AirflowRescheduleException):
        sensor.execute({"ti": ti})
    table.append(make_rows(range(50, 55)))
    assert sensor.execute({"ti": ti})["snapshot_ids"] == [4]
    poking = SnapTableNewSnapshotSensor(task_id="p", table="orders", after_snapshot_id=3, mode="poke", poke_interval=0.01)
    assert poking.execute({})["to_snapshot_id"] == 4


def test_deferrable_sensor_defers_then_completes(root):
    table = new_table(root)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", consumer_id="reader", deferrable=True, poke_interval=7, timeout=60)
    table.update_consumer("reader", 4)
    with pytest.raises(TaskDeferred) as info:
        sensor.execute({})
    deferred = info.value
    assert deferred.method_name == "execute_complete"
    assert deferred.timeout.total_seconds() == 60
    classpath, kwargs = deferred.trigger.serialize()
    assert classpath == "airflow_snaptable.triggers.snaptable.SnapTableNewSnapshotTrigger"
    assert kwargs == {
        "table": table.uri,
        "after_snapshot_id": 3,
        "snaptable_conn_id": "snaptable_default",
        "commit_kinds": ["APPEND", "DELETE", "OVERWRITE"],
        "poke_interval": 7.0,
        "wait_for_table": True,
    }
    # Something new: execute returns without deferring.
    table.append(make_rows(range(50, 55)))
    assert sensor.execute({})["to_snapshot_id"] == 4


def test_execute_complete(root):
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=0)
    event = {"status": "success", "table": "/t", "from_snapshot_id": 0, "to_snapshot_id": 2}
    assert sensor.execute_complete({}, event) == {"table": "/t", "from_snapshot_id": 0, "to_snapshot_id": 2}
    with pytest.raises(AirflowException, match="boom"):
        sensor.execute_complete({}, {"status": "error", "message": "boom"})
    with pytest.raises(AirflowException, match="without an event"):
        sensor.execute_complete({}, None)


# -- SnapTableNewSnapshotTrigger ---------------------------------------------------------------------------


def first_event(trigger, timeout=20):
    async def go():
        return await asyncio.wait_for(anext(trigger.run()), timeout)

    return asyncio.run(go())


def test_trigger_serialization_round_trip():
    trigger = SnapTableNewSnapshotTrigger(table="s3://b/t", after_snapshot_id=4, snaptable_conn_id="c", commit_kinds=["append"], poke_interval=3)
    classpath, kwargs = trigger.serialize()
    rebuilt = import_string(classpath)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert kwargs["commit_kinds"] == ["APPEND"]
    event_trigger = SnapTableSnapshotEventTrigger(table="orders", start_after_snapshot_id=2, commit_delay=0.5)
    classpath, kwargs = event_trigger.serialize()
    assert import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)


def test_trigger_fires_when_a_snapshot_lands_polling_off_the_event_loop(root, monkeypatch):
    table = new_table(root)
    from airflow_snaptable.core.incremental import find_new_snapshots as real

    threads = []

    def spy(*args, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr("airflow_snaptable.core.incremental.find_new_snapshots", spy)  # what the trigger's PositionWatch polls
    trigger = SnapTableNewSnapshotTrigger(table="orders", after_snapshot_id=3, poke_interval=0.05)

    async def go():
        events = trigger.run()
        pending = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.3)
        assert not pending.done()
        await asyncio.to_thread(table.append, make_rows(range(90, 95)))
        return await asyncio.wait_for(pending, 10)

    event = asyncio.run(go())
    assert event.payload["status"] == "success"
    assert event.payload["snapshot_ids"] == [4] and event.payload["added_records"] == 5
    assert threads and not any(threads), "storage was read on the event loop thread"


def test_trigger_reports_errors_as_events(root):
    event = first_event(SnapTableNewSnapshotTrigger(table="missing_table", after_snapshot_id=0, poke_interval=0.01, wait_for_table=False))
    assert event.payload["status"] == "error" and "TableNotFoundError" in event.payload["message"]
    event = first_event(SnapTableNewSnapshotTrigger(table="orders", after_snapshot_id=0, snaptable_conn_id="no_such_conn"))
    assert event.payload["status"] == "error" and "no_such_conn" in event.payload["message"]


def test_triggers_and_the_sensor_wait_for_a_table_created_later(root):
    """A downstream DAG may start before the upstream one created the table: it waits, then fires."""
    trigger = SnapTableNewSnapshotTrigger(table="later", after_snapshot_id=0, poke_interval=0.02)
    watcher = Watcher(DummyStateStore(), table="later")
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="later", consumer_id="reader", poke_interval=1)
    assert sensor.poke({}).is_done is False

    async def go():
        events = trigger.run()
        pending = asyncio.ensure_future(anext(events))
        await watcher.start()
        await asyncio.sleep(0.3)
        assert not pending.done() and watcher.events == []
        await asyncio.to_thread(new_table, root, "later", 2)
        event = await asyncio.wait_for(pending, 10)
        for _ in range(500):  # until the watcher has reported snapshot 2 (in one event or two)
            if watcher.events and watcher.events[-1]["to_snapshot_id"] == 2:
                break
            await asyncio.sleep(0.02)
        await watcher.stop()
        return event

    event = asyncio.run(go())
    # The trigger may poll between the two commits: it fires from the start of the history either way.
    assert event.payload["status"] == "success" and event.payload["from_snapshot_id"] == 0
    assert event.payload["snapshot_ids"] in ([1], [1, 2])
    # The watcher saw the table appear: its whole history is new, not only what came after.
    seen = ranges(watcher.events)
    assert seen[0][0] == 0 and seen[-1][1] == 2 and all(a[1] == b[0] for a, b in zip(seen, seen[1:]))
    sensor._baseline = None
    assert sensor.poke({}).xcom_value["snapshot_ids"] == [1, 2]
    strict = SnapTableNewSnapshotSensor(task_id="s", table="missing", after_snapshot_id=0, wait_for_table=False)
    with pytest.raises(TableNotFoundError):
        strict.poke({})


def test_trigger_and_sensor_count_the_same_commit_kinds_by_default():
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="/t", after_snapshot_id=0)
    trigger = SnapTableNewSnapshotTrigger(table="/t", after_snapshot_id=0)
    assert sensor.commit_kinds == trigger.commit_kinds == SnapTableSnapshotEventTrigger(table="/t").commit_kinds
    assert "COMPACT" not in trigger.commit_kinds


# -- SnapTableSnapshotEventTrigger ---------------------------------------------------------------------------


class Watcher:
    """Runs a SnapTableSnapshotEventTrigger like the triggerer: collects events; stop() cancels it (a restart)."""

    def __init__(self, store, **kwargs):
        self.trigger = SnapTableSnapshotEventTrigger(**{"poke_interval": 0.02, "commit_delay": 0.05, **kwargs})
        self.trigger.asset_state_store = store
        self.events: list[dict] = []

    async def start(self, timeout=10.0):
        """Starts the trigger; returns once it holds its starting position (what lands after is new to it),
        waits for its table, or failed. A fixed sleep here raced the first poll on a loaded machine."""
        positioned = asyncio.Event()
        load, save = self.trigger.load_position, self.trigger.save_position

        async def loading(uri):
            found = await load(uri)
            if found is not None:
                positioned.set()
            return found

        async def saving(uri, snapshot_id):
            await save(uri, snapshot_id)
            positioned.set()

        self.trigger.load_position, self.trigger.save_position = loading, saving

        async def consume():
            async for event in self.trigger.run():
                self.events.append(event.payload)

        self.task = asyncio.ensure_future(consume())

        async def started():
            while not (positioned.is_set() or self.task.done() or getattr(self.trigger, "_told_missing", False)):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(started(), timeout)

    async def stop(self):
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass

    async def wait_for(self, count, timeout=10.0):
        async def until():
            while len(self.events) < count:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(until(), timeout)
        await asyncio.sleep(0.2)  # let the position be committed


def ranges(events):
    return [(e["from_snapshot_id"], e["to_snapshot_id"]) for e in events]


def test_event_trigger_emits_one_event_per_new_range_and_survives_restarts(root):
    table = new_table(root)  # snapshots 1..3 exist before the watcher starts: not replayed
    store = DummyStateStore()

    async def scenario():
        first = Watcher(store, table="orders")
        await first.start()
        assert store.data[POSITION_KEY] | {"lineage": None} == {"table": table.uri, "last_snapshot_id": 3, "lineage": None}
        await asyncio.to_thread(table.append, make_rows(range(40, 45)))
        await first.wait_for(1)
        await asyncio.to_thread(table.append, make_rows(range(45, 50)))
        await asyncio.to_thread(table.append, make_rows(range(50, 55)))
        await first.wait_for(2)
        await first.stop()
        # While the triggerer is down, two more snapshots and a compaction land.
        await asyncio.to_thread(table.append, make_rows(range(60, 62), partitions=1))
        await asyncio.to_thread(table.append, make_rows(range(62, 64), partitions=1))
        second = Watcher(store, table="orders")
        await second.start()
        await second.wait_for(1)
        await asyncio.to_thread(table.compact, min_file_num=2)
        await asyncio.sleep(0.3)
        await second.stop()
        return first.events, second.events

    first_events, second_events = asyncio.run(scenario())
    assert ranges(first_events)[0] == (3, 4)
    # Ranges join up: every snapshot exactly once, across the restart.
    covered = [s for e in first_events + second_events for s in e["snapshot_ids"]]
    assert covered == [4, 5, 6, 7, 8]
    assert ranges(second_events) == [(6, 8)]
    assert second_events[0]["added_records"] == 4
    # The compaction (snapshot 9) fired nothing, but the position moved past it.
    assert store.data[POSITION_KEY]["last_snapshot_id"] == 9


def test_a_crash_before_the_position_is_stored_repeats_the_event_never_loses_it(root):
    table = new_table(root)
    store = DummyStateStore()

    async def scenario():
        watcher = Watcher(store, table="orders", commit_delay=30)
        await watcher.start()
        await asyncio.to_thread(table.append, make_rows(range(40, 45)))
        await watcher.wait_for(1)
        await watcher.stop()  # the triggerer dies during the commit delay
        assert store.data[POSITION_KEY]["last_snapshot_id"] == 3
        again = Watcher(store, table="orders")
        await again.start()
        await again.wait_for(1)
        await again.stop()
        return watcher.events, again.events

    before, after = asyncio.run(scenario())
    assert ranges(before) == ranges(after) == [(3, 4)]
    assert store.data[POSITION_KEY]["last_snapshot_id"] == 4


def test_event_trigger_start_position_rollback_and_expiry(root):
    table = new_table(root, snapshots=5)
    store = DummyStateStore()

    async def scenario():
        watcher = Watcher(store, table="orders", start_after_snapshot_id=1, with_changes=False)
        await watcher.start()
        await watcher.wait_for(1)
        assert ranges(watcher.events) == [(1, 5)] and "added_records" not in watcher.events[0]
        await asyncio.to_thread(table.rollback_to, 3)
        await asyncio.sleep(0.3)
        assert store.data[POSITION_KEY]["last_snapshot_id"] == 3  # moved back with the table
        await asyncio.to_thread(table.append, make_rows(range(70, 75)))
        await watcher.wait_for(2)
        await watcher.stop()
        # Down for a while: new snapshots arrive and the old ones expire before they were reported.
        for i in range(4):
            await asyncio.to_thread(table.append, make_rows(range(80 + i * 5, 85 + i * 5)))
        await asyncio.to_thread(lambda: table.expire_snapshots(retain_min=2, time_retained="0 s"))
        again = Watcher(store, table="orders")
        await again.start()
        await again.wait_for(1)
        await again.stop()
        return watcher.events, again.events

    events, later = asyncio.run(scenario())
    assert ranges(events) == [(1, 5), (3, 4)]
    assert ranges(later) == [(7, 8)]
    assert later[0]["expired_after_snapshot_id"] == 4


def test_event_trigger_without_a_state_store_keeps_the_position_in_memory(root):
    table = new_table(root)

    async def scenario():
        watcher = Watcher(None, table="orders")
        await watcher.start()
        await asyncio.to_thread(table.append, make_rows(range(40, 45)))
        await watcher.wait_for(1)
        await watcher.stop()
        return watcher

    watcher = asyncio.run(scenario())
    assert ranges(watcher.events) == [(3, 4)]
    assert watcher.trigger._memory_state | {"lineage": None} == {"table": table.uri, "last_snapshot_id": 4, "lineage": None}


def test_event_trigger_watching_several_assets_keeps_its_position_in_the_named_one(root, monkeypatch):
    """The triggerer's real accessors of several assets: the position lives in ``position_asset``'s state;
    without it the watcher fails with an error that says what to set."""
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessor, AssetStateStoreAccessors

    table = new_table(root)
    states: dict[str, dict] = {"a": {POSITION_KEY: {"table": table.uri, "last_snapshot_id": 2}}, "b": {}}

    async def aget(self, key, default=None):  # the supervisor's side of the accessor, as a dict
        return states[self._name].get(key, default)

    async def aset(self, key, value):
        states[self._name][key] = value

    monkeypatch.setattr(AssetStateStoreAccessor, "aget", aget)
    monkeypatch.setattr(AssetStateStoreAccessor, "aset", aset)
    accessors = AssetStateStoreAccessors(inlets=[Asset(name="a", uri="file:///assets/a"), Asset(name="b", uri="file:///assets/b")])

    async def scenario(**kwargs):
        watcher = Watcher(accessors, table="orders", **kwargs)
        await watcher.start()
        if kwargs:
            await watcher.wait_for(1)
        await watcher.stop()
        return watcher

    with pytest.raises(InvalidArgumentError, match="position_asset"):
        asyncio.run(scenario())  # the watcher fails; stopping it re-raises its error
    assert ranges(asyncio.run(scenario(position_asset="a")).events) == [(2, 3)]
    assert states["a"][POSITION_KEY]["last_snapshot_id"] == 3 and states["b"] == {}




# -- Iceberg tables: positions are sequence numbers along main -----------------------------------


def test_sensor_and_trigger_on_an_iceberg_table(tmp_path, monkeypatch):
    """The connection's extra holds the catalog; the sensor pokes, defers, and its trigger fires when pyiceberg
    commits, with the same XCom shape as on this package's tables (positions: data sequence numbers)."""
    from tests.iceberg.conftest import IcebergEnv, rows as iceberg_rows

    (tmp_path / "wh").mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/wh"}, str(tmp_path / "wh"))
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG", snaptable_conn(extra={"catalog": env.properties}))
    iceberg = env.create()
    for i in range(2):
        iceberg.append(iceberg_rows(i))
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="iceberg://db.orders", snaptable_conn_id="iceberg", after_snapshot_id=1)
    assert sensor.poke({}).xcom_value == {
        "table": "iceberg://db.orders", "from_snapshot_id": 1, "to_snapshot_id": 2, "snapshot_ids": [2],
        "commit_kinds": ["APPEND"], "matching_snapshot_ids": [2], "added_records": 2, "deleted_records": 0,
    }
    deferring = SnapTableNewSnapshotSensor(task_id="d", table="iceberg://db.orders", snaptable_conn_id="iceberg",
                                  after_snapshot_id=2, deferrable=True, poke_interval=0.05)
    with pytest.raises(TaskDeferred) as info:
        deferring.execute({})
    trigger = info.value.trigger

    async def go():
        events = trigger.run()
        pending = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.3)
        assert not pending.done()
        await asyncio.to_thread(iceberg.append, iceberg_rows(7))
        return await asyncio.wait_for(pending, 20)

    event = asyncio.run(go())
    assert event.payload["status"] == "success" and event.payload["snapshot_ids"] == [3]
    assert deferring.execute_complete({}, event.payload)["to_snapshot_id"] == 3
    # A branch instead of main: the sensor and its trigger follow it.
    iceberg.manage_snapshots().create_branch(iceberg.refresh().metadata.current_snapshot_id, "audit").commit()
    iceberg = iceberg.refresh()
    iceberg.append(iceberg_rows(8), branch="audit")  # 4, on audit only
    on_branch = SnapTableNewSnapshotSensor(task_id="b", table="iceberg://db.orders", snaptable_conn_id="iceberg",
                                  after_snapshot_id="3", ref="{{ params.branch }}", deferrable=True)
    on_branch.render_template_fields({"params": {"branch": "audit"}})
    assert on_branch.execute({})["snapshot_ids"] == [4]
    assert not SnapTableNewSnapshotSensor(task_id="m", table="iceberg://db.orders", snaptable_conn_id="iceberg",
                                 after_snapshot_id=3).poke({}).is_done
    waiting = SnapTableNewSnapshotSensor(task_id="w", table="iceberg://db.orders", snaptable_conn_id="iceberg",
                                after_snapshot_id=4, ref="audit", deferrable=True)
    with pytest.raises(TaskDeferred) as info:
        waiting.execute({})
    classpath, kwargs = info.value.trigger.serialize()
    assert kwargs["ref"] == "audit" and import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)
    # A consumer (core/formats/iceberg/consumers.py) as the baseline: it has read positions 1 and 2.
    Table.open("iceberg://db.orders", catalog=env.properties).update_consumer("reader", 3)
    by_consumer = SnapTableNewSnapshotSensor(task_id="c", table="iceberg://db.orders", snaptable_conn_id="iceberg", consumer_id="reader")
    assert by_consumer.poke({}).xcom_value["snapshot_ids"] == [3]  # main's: 4 is on the branch


# -- the sensor follows the table's lineage, not its ids (core/lineage.py) -----------------------------


def test_a_rollback_and_as_many_commits_landing_on_the_checked_id_are_read(root):
    table = new_table(root, snapshots=3)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=3, commit_kinds=["OVERWRITE"])
    table.append(make_rows(range(100, 103)))
    table.append(make_rows(range(103, 106)))
    assert not sensor.poke({}).is_done  # 4 and 5 are appends: checked through 5
    table.rollback_to(snapshot_id=3)
    table.overwrite(make_rows(range(200, 203)))
    table.overwrite(make_rows(range(203, 206)))  # 4 and 5 again: overwrites now
    done = sensor.poke({})
    assert done.is_done and done.xcom_value["matching_snapshot_ids"] == [4, 5]


def test_a_consumer_sensor_follows_its_consumer_back_after_a_rollback_past_its_position(root):
    table = new_table(root, snapshots=4)
    table.update_consumer("reader", 5)  # has read 1..4
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", consumer_id="reader", commit_kinds=["OVERWRITE"])
    table.append(make_rows(range(100, 103)))
    assert not sensor.poke({}).is_done
    table.rollback_to(snapshot_id=2, force=True)  # moves the consumer back to 3
    for i in range(3):
        table.overwrite(make_rows(range(200 + i * 3, 203 + i * 3)))  # 3, 4, 5: by the old baseline (4), only 5
    done = sensor.poke({}).xcom_value
    assert (done["from_snapshot_id"], done["matching_snapshot_ids"]) == (2, [3, 4, 5])


def test_a_fixed_baseline_rolled_back_past_is_an_error_not_a_silent_skip(root):
    table = new_table(root, snapshots=4)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=4, commit_kinds=["OVERWRITE"])
    assert not sensor.poke({}).is_done
    table.rollback_to(snapshot_id=2)
    for i in range(3):
        table.overwrite(make_rows(range(200 + i * 3, 203 + i * 3)))  # 3, 4, 5: (4, 5] would skip 3 and 4
    with pytest.raises(SnapshotNotFoundError, match="snapshot 4 of .* was rolled back"):
        sensor.poke({})


def test_a_sensor_waiting_on_a_table_re_created_at_its_location_reports_the_new_table_whole(root):
    import shutil

    table = new_table(root, snapshots=3)
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="orders", after_snapshot_id=3)
    assert not sensor.poke({}).is_done
    shutil.rmtree(table.uri)
    new_table(root, snapshots=4)  # by ids, only 4 is new
    done = sensor.poke({}).xcom_value
    assert (done["from_snapshot_id"], done["snapshot_ids"]) == (0, [1, 2, 3, 4])


def test_a_sensor_waiting_on_an_iceberg_table_dropped_and_re_created_reports_the_new_table(tmp_path, monkeypatch):
    from tests.iceberg.conftest import IcebergEnv, rows as iceberg_rows

    (tmp_path / "wh").mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/wh"}, str(tmp_path / "wh"))
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG", snaptable_conn(extra={"catalog": env.properties}))
    iceberg = env.create()
    for i in range(4):
        iceberg.append(iceberg_rows(i))
    sensor = SnapTableNewSnapshotSensor(task_id="s", table="iceberg://db.orders", snaptable_conn_id="iceberg", after_snapshot_id=4)
    assert not sensor.poke({}).is_done
    env.catalog().drop_table("db.orders")
    recreated = env.create()
    for i in range(2):
        recreated.append(iceberg_rows(10 + i))  # sequence numbers 1 and 2: below the old position, never "new" by number
    done = sensor.poke({}).xcom_value
    assert (done["from_snapshot_id"], done["snapshot_ids"]) == (0, [1, 2])


def test_event_trigger_continues_from_the_lineage_after_a_rollback_and_commits_while_it_was_down(root):
    table = new_table(root, snapshots=5)
    store = DummyStateStore()

    async def scenario():
        watcher = Watcher(store, table="orders", start_after_snapshot_id=1, with_changes=False)
        await watcher.start()
        await watcher.wait_for(1)
        await watcher.stop()
        await asyncio.to_thread(table.rollback_to, 3)
        for i in range(3):  # 4, 5, 6: by ids only 6 is after the stored position 5
            await asyncio.to_thread(table.append, make_rows(range(300 + i * 5, 305 + i * 5)))
        again = Watcher(store, table="orders", with_changes=False)
        await again.start()
        await again.wait_for(1)
        await again.stop()
        return watcher.events, again.events

    events, later = asyncio.run(scenario())
    assert ranges(events) == [(1, 5)]
    assert ranges(later) == [(3, 6)] and later[0]["snapshot_ids"] == [4, 5, 6]


def test_event_trigger_reports_a_table_re_created_at_its_location_from_its_first_snapshot(root):
    import shutil

    table = new_table(root, snapshots=3)
    store = DummyStateStore()

    async def scenario():
        watcher = Watcher(store, table="orders", with_changes=False)
        await watcher.start()  # from the latest: 3
        await watcher.stop()
        await asyncio.to_thread(shutil.rmtree, table.uri)
        await asyncio.to_thread(new_table, root, "orders", 4)  # by ids only 4 is new
        again = Watcher(store, table="orders", with_changes=False)
        await again.start()
        await again.wait_for(1)
        await again.stop()
        return again.events

    later = asyncio.run(scenario())
    assert ranges(later) == [(0, 4)] and later[0]["snapshot_ids"] == [1, 2, 3, 4]


def test_event_trigger_reports_an_iceberg_table_dropped_and_re_created_under_its_name(tmp_path, monkeypatch):
    from tests.iceberg.conftest import IcebergEnv, rows as iceberg_rows

    (tmp_path / "wh").mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/wh"}, str(tmp_path / "wh"))
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG", snaptable_conn(extra={"catalog": env.properties}))
    iceberg = env.create()
    for i in range(4):
        iceberg.append(iceberg_rows(i))
    store = DummyStateStore()

    async def scenario():
        watcher = Watcher(store, table="iceberg://db.orders", snaptable_conn_id="iceberg", with_changes=False)
        await watcher.start()  # from the latest: sequence number 4
        await watcher.stop()
        env.catalog().drop_table("db.orders")
        recreated = env.create()
        for i in range(2):
            recreated.append(iceberg_rows(10 + i))  # sequence numbers 1 and 2: never above the old position
        again = Watcher(store, table="iceberg://db.orders", snaptable_conn_id="iceberg", with_changes=False)
        await again.start()
        await again.wait_for(1)
        await again.stop()
        return again.events

    later = asyncio.run(scenario())
    assert ranges(later) == [(0, 2)]


PAIMON_COLUMNS = [["p", "string"], ["id", "int64"], ["v", "string"]]


def _paimon_steps(name: str, writes: int, overwrite: bool = False, create: bool = True) -> list[dict]:
    steps = [{"create": name, "columns": PAIMON_COLUMNS, "partition": ["p"], "options": {"bucket": "-1"}}] if create else []
    for i in range(writes):
        steps.append({"write": name, "rows": [["a", 100 + i, "w"]], **({"overwrite": {}} if overwrite else {})})
    return steps


def test_the_sensor_follows_a_paimon_tables_lineage_rollback_and_re_creation(paimon, tmp_path):
    import shutil

    from tests.paimon.conftest import run_client

    warehouse = str(tmp_path / "pw")
    run_client(paimon.python, warehouse, _paimon_steps("db.t", 5))
    uri = f"{warehouse}/db.db/t"
    sensor = SnapTableNewSnapshotSensor(task_id="s", table=uri, after_snapshot_id=3, commit_kinds=["OVERWRITE"])
    assert not sensor.poke({}).is_done  # 4, 5: appends
    Table.open(uri).rollback_to(snapshot_id=3)
    run_client(paimon.python, warehouse, _paimon_steps("db.t", 2, overwrite=True, create=False))  # 4, 5 again: overwrites
    assert sensor.poke({}).xcom_value["matching_snapshot_ids"] == [4, 5]

    waiting = SnapTableNewSnapshotSensor(task_id="w", table=uri, after_snapshot_id=5)
    assert not waiting.poke({}).is_done
    shutil.rmtree(uri)
    run_client(paimon.python, warehouse, _paimon_steps("db.t", 6))  # by ids only 6 is new
    done = waiting.poke({}).xcom_value
    assert (done["from_snapshot_id"], done["snapshot_ids"]) == (0, [1, 2, 3, 4, 5, 6])
