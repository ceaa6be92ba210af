"""The table-format seam (core/lifecycle/store.py): the native format implements it, and the engine keeps to it."""

from __future__ import annotations

import inspect
import json
import os

import pytest

from airflow_snaptable.core import Table
from airflow_snaptable.core.native.consumers import ConsumerManager
from airflow_snaptable.core.errors import UnsupportedMetadataError
from airflow_snaptable.core.lifecycle.expiry.run import SnapshotExpiry
from airflow_snaptable.core.formats.native.files import NativeFiles
from airflow_snaptable.core.lifecycle.plan_executor import PlanExecutor
from airflow_snaptable.core.lifecycle.rollback import Rollback
from airflow_snaptable.core.native.snapshot import SnapshotManager, snapshot_path
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.store import ConsumerStore, FileStore, SnapshotStore, TableStore, TagStore
from airflow_snaptable.core.lifecycle.tags import TagLifecycle
from airflow_snaptable.core.native.tags import TagManager
from tests.conftest import SCHEMA, make_rows, sorted_ids
from tests.core.test_lifecycle import tree

NATIVE = [(SnapshotStore, SnapshotManager), (FileStore, NativeFiles), (TagStore, TagManager), (ConsumerStore, ConsumerManager)]


def _methods(protocol) -> dict:
    return {name: member for name, member in vars(protocol).items() if inspect.isfunction(member) and not name.startswith("_")}


def _parameters(function) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


@pytest.mark.parametrize(("protocol", "native"), NATIVE, ids=[p.__name__ for p, _ in NATIVE])
def test_the_native_format_implements_every_store_method(protocol, native):
    methods = _methods(protocol)
    assert methods, "a store protocol with no method"
    for name, member in methods.items():
        implementation = getattr(native, name, None)
        assert callable(implementation), f"{native.__name__} has no {name}"
        assert _parameters(implementation) == _parameters(member), f"{native.__name__}.{name}"


def _table_with_history(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), SCHEMA, partition_by=["p"], options={"snapshot.num-retained.min": "1"})
    table.append(make_rows([0, 1, 2]))
    table.create_tag("first")
    table.overwrite(make_rows([3]), partitions=[{"p": 0}])
    table.append(make_rows([4]))
    return table


def test_the_engine_keeps_its_own_files_where_the_store_says(tmp_path):
    """A store for another format puts the engine's files beside the format's: the engine writes
    plans, intents and the re-add registry only there, never into the table's own directories."""
    table = _table_with_history(tmp_path)
    aside = Storage.from_uri(str(tmp_path / "lifecycle"))
    store = TableStore(table.uri, table.snapshot_manager, table.native_files, table.tag_manager, table.consumer_manager, aside)
    executor = PlanExecutor(store)
    written: dict[str, list[str]] = {"table": [], "aside": []}
    table.storage.on_operation = lambda kind, path: kind == "write" and written["table"].append(path.split("/")[0])
    aside.on_operation = lambda kind, path: kind == "write" and written["aside"].append(path.split("/")[0])

    rollback = Rollback(store, executor, lambda request: table.new_commit().commit(request), table.clock)
    result = rollback.rollback_to(snapshot_id=1, keep_history=True)  # re-adds the file the overwrite deleted
    assert aside.list_names("readd") == [f"readd-{result.latest_snapshot_id}.json"]
    TagLifecycle(store, executor, table.clock, None).create("second")
    expired = SnapshotExpiry(store, executor, table.options, table.clock).expire(retain_min=1, time_retained="0 s")
    assert expired.expired_snapshot_ids == [1, 2, 3]

    assert set(written["aside"]) == {"readd", "intent", "plan"}
    assert not set(written["table"]) & {"readd", "intent", "plan"}
    assert aside.list_names("plan") == [] and aside.list_names("intent") == []  # finished, withdrawn
    assert sorted_ids(table.scan(tag="first").to_arrow()) == [0, 1, 2]  # the tags' files were protected
    assert sorted_ids(table.scan().to_arrow()) == [0, 1, 2]


def test_what_the_store_does_not_understand_stops_expiry_before_anything_is_deleted(tmp_path):
    table = _table_with_history(tmp_path)
    path = os.path.join(table.uri, snapshot_path(1))
    with open(path) as handle:
        doc = json.load(handle)
    doc["version"] = 2
    with open(path, "w") as handle:
        json.dump(doc, handle)
    before = tree(table.uri)
    with pytest.raises(UnsupportedMetadataError, match="format version 2"):
        Table.open(table.uri).expire_snapshots(retain_min=1, time_retained="0 s")
    assert tree(table.uri) == before
