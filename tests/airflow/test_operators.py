"""Operators: arguments checked at parse time, templates rendered and coerced, core actions run."""

from __future__ import annotations

import datetime as dt
import inspect
import os
import time

import pytest

from airflow_snaptable import operators as ops
from airflow_snaptable.core import Table
from airflow_snaptable.core.errors import InvalidArgumentError, TagAlreadyExistsError
from tests.airflow.conftest import snaptable_conn
from tests.conftest import SCHEMA, make_rows

DAY = 86_400_000
T0 = int(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = str(tmp_path / "warehouse")
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(root))
    return root


@pytest.fixture
def orders(root):
    """Six snapshots, one per day at noon from 2026-01-01."""
    table = Table.create(f"{root}/orders", SCHEMA, partition_by=["p"])
    for day in range(6):
        table.clock = lambda d=day: T0 + d * DAY + DAY // 2
        table.append(make_rows(range(day * 10, day * 10 + 10)))
    table.clock = lambda: int(time.time() * 1000)
    return table


def render(op, **context):
    """Render the operator's templates like the task runner does."""
    op.render_template_fields(context)
    return op


def run(op, **context):
    return render(op, **context).execute(context)


ALL_OPERATORS = [
    ops.SnapTableExpireSnapshotsOperator,
    ops.SnapTableCreateTagOperator,
    ops.SnapTableDeleteTagOperator,
    ops.SnapTablePeriodicTagOperator,
    ops.SnapTableExpireTagsOperator,
    ops.SnapTableExpireConsumersOperator,
    ops.SnapTableRollbackOperator,
    ops.SnapTableRemoveOrphanFilesOperator,
    ops.SnapTableCompactOperator,
    ops.SnapTableAdvanceConsumerOperator,
    ops.SnapTableRenameTagOperator,
    ops.SnapTableCleanOperator,
    ops.SnapTableCreateSavepointOperator,
    ops.SnapTableDeleteSavepointOperator,
    ops.SnapTableRestoreSavepointOperator,
    ops.SnapTableRewriteManifestsOperator,
]


@pytest.mark.parametrize("cls", ALL_OPERATORS, ids=lambda c: c.__name__)
def test_docstrings_name_every_parameter_and_templated_field(cls):
    doc = inspect.getdoc(cls) + "\n" + inspect.getdoc(ops.SnapTableBaseOperator)
    for field in cls.template_fields:
        assert f":param {field}:" in doc, f"{cls.__name__}: {field} undocumented"
        text = doc.split(f":param {field}:", 1)[1].split(":param", 1)[0]
        assert "(templated)" in text, f"{cls.__name__}: {field} is templated but the docstring does not say so"
    for name in inspect.signature(cls.__init__).parameters:
        if name not in ("self", "kwargs"):
            assert f":param {name}:" in doc, f"{cls.__name__}: parameter {name} undocumented"
    assert issubclass(cls, ops.SnapTableBaseOperator)


def test_class_names_carry_the_integration_prefix():
    """The short names beside them: tests/airflow/test_short_names.py."""
    for cls in ALL_OPERATORS:
        assert cls.__name__.startswith("SnapTable") and cls.__name__.endswith("Operator")


def test_sensor_docstring_names_every_templated_field():
    from airflow_snaptable.sensors import SnapTableNewSnapshotSensor

    doc = inspect.getdoc(SnapTableNewSnapshotSensor)
    for field in SnapTableNewSnapshotSensor.template_fields:
        text = doc.split(f":param {field}:", 1)[1].split(":param", 1)[0]
        assert "(templated)" in text, field


def test_expire_with_templated_bounds(orders):
    op = ops.SnapTableExpireSnapshotsOperator(
        task_id="expire", table="orders", retain_min="{{ params.keep }}", retain_max="{{ params.keep + 2 }}", time_retained="0 s"
    )
    result = run(op, params={"keep": 2})
    assert result["action"] == "expire-snapshots" and result["table"] == orders.uri
    assert result["result"]["expired_snapshot_ids"] == [1, 2, 3, 4]
    assert [s.id for s in orders.snapshots()] == [5, 6]


def test_expire_dry_run_and_older_than(orders):
    op = ops.SnapTableExpireSnapshotsOperator(task_id="expire", table=orders.uri, retain_min=1, older_than="{{ data_interval_start }}", dry_run=True)
    result = run(op, data_interval_start="2026-01-03T00:00:00+00:00")
    # A snapshot expires once its successor is older than the bound: 2 (Jan 2nd noon) is, 3 (Jan 3rd noon) is not.
    assert result["result"]["expired_snapshot_ids"] == [1]
    assert result["result"]["dry_run"] is True
    assert [s.id for s in orders.snapshots()] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("dry", [True, False])
def test_every_action_argument_is_a_template_field_flags_included(orders, dry):
    """dry_run and catch_up take templates like every other argument: the rendered "True"/"False" is read strictly."""
    for cls in ALL_OPERATORS:
        assert {f.name for f in cls.action_fields()} <= set(cls.template_fields), cls.__name__
    op = ops.SnapTableExpireSnapshotsOperator(
        task_id="expire", table="orders", retain_min=1, time_retained="0 s", dry_run="{{ params.dry }}"
    )
    result = run(op, params={"dry": dry})
    assert result["result"]["dry_run"] is dry
    assert result["result"]["expired_snapshot_ids"] == [1, 2, 3, 4, 5]
    assert [s.id for s in orders.snapshots()] == ([1, 2, 3, 4, 5, 6] if dry else [6])
    periodic = ops.SnapTablePeriodicTagOperator(task_id="tags", table="orders", period="daily", catch_up="{{ params.dry }}")
    created = run(periodic, params={"dry": dry})["result"]["created"]
    assert len(created) > 300 if dry else len(created) == 1  # catch-up tags every day since 2026-01-06
    orphans = ops.SnapTableRemoveOrphanFilesOperator(task_id="orphans", table="orders", dry_run="{{ params.dry }}")
    assert run(orphans, params={"dry": dry})["result"]["dry_run"] is dry
    bad = ops.SnapTableExpireSnapshotsOperator(task_id="expire", table="orders", dry_run="{{ params.dry }}")
    with pytest.raises(InvalidArgumentError, match="dry_run"):
        run(bad, params={"dry": "maybe"})


def test_retain_max_alone_keeps_that_many_when_the_minimum_is_the_default(orders):
    """The README's example: a user who says "keep 5" means it; the default minimum (10) follows a lower maximum."""
    result = run(ops.SnapTableExpireSnapshotsOperator(task_id="expire", table="orders", retain_max=2))["result"]
    assert result["expired_snapshot_ids"] == [1, 2, 3, 4]  # beyond the 2 newest regardless of age; 2 are kept
    assert [s.id for s in Table.open(orders.uri).snapshots()] == [5, 6]


def test_retain_max_below_a_minimum_someone_set_says_where_the_minimum_comes_from(orders):
    op = ops.SnapTableExpireSnapshotsOperator(task_id="expire", table="orders", retain_max=2, retain_min=3)
    with pytest.raises(InvalidArgumentError, match=r"retain_max \(2\) must be >= retain_min \(3\)"):
        run(op)
    assert run(ops.SnapTableExpireSnapshotsOperator(task_id="expire", table="orders", retain_max=2, retain_min=1))["result"][
        "expired_snapshot_ids"
    ] == [1, 2, 3, 4, 5]  # beyond the 2 newest regardless of age; 5 as well, being older than the default hour


def test_the_tables_asset_uri_and_the_event_a_maintenance_task_emits(orders):
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_snaptable.assets import create_asset, table_asset_uri, table_uri_of_asset

    assert table_asset_uri("s3a://bucket/orders/") == "snaptable://s3/bucket/orders"
    assert table_asset_uri("/data/orders") == "snaptable://file/data/orders"
    assert table_asset_uri("iceberg://db.orders") == "snaptable://iceberg/db.orders"
    for uri in ("s3://bucket/orders", "/data/orders", "iceberg://db.orders", "gs://b/w/t"):
        assert table_uri_of_asset(table_asset_uri(uri)) == uri
    with pytest.raises(InvalidArgumentError):
        table_asset_uri("orders")  # a name: the hook resolves it to a URI first
    # Airflow normalizes the scheme through the provider's handler.
    assert Asset(uri="snaptable://S3A/bucket/orders").uri == "snaptable://s3/bucket/orders"
    with pytest.raises(ValueError):
        Asset(uri="snaptable://s3")
    asset = create_asset(orders.uri)
    op = ops.SnapTableExpireSnapshotsOperator(
        task_id="expire", table="orders", retain_min=2, time_retained="0 s", outlets=[asset, Asset(uri="s3://other/x")]
    )
    events = OutletEventAccessors()
    run(op, outlet_events=events)
    extra = events[asset].extra
    assert extra["action"] == "expire-snapshots" and extra["table"] == orders.uri
    assert extra["earliest_after"] == 5 and extra["deleted_snapshot_files"] == 4
    assert not any(isinstance(v, (list, dict)) for v in extra.values())


def test_create_tag_as_of_the_period_boundary_and_if_exists(orders):
    op = ops.SnapTableCreateTagOperator(
        task_id="tag", table="orders", tag_name="{{ data_interval_start | ds }}", as_of="{{ data_interval_end }}", time_retained="7 d"
    )
    context = {"data_interval_start": dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc), "data_interval_end": dt.datetime(2026, 1, 4, tzinfo=dt.timezone.utc)}
    result = run(op, **context)
    # The state at the end of Jan 3rd is snapshot 3 (committed Jan 3rd noon), even though the run is late.
    assert result["result"]["name"] == "2026-01-03" and result["result"]["snapshot_id"] == 3
    assert result["result"]["time_retained_millis"] == 7 * DAY
    again = ops.SnapTableCreateTagOperator(task_id="tag", table="orders", tag_name="2026-01-03", snapshot_id=5)
    with pytest.raises(TagAlreadyExistsError):
        run(again)
    assert [t.snapshot_id for t in orders.tags()] == [3]


def test_create_tag_if_exists_skip_returns_the_same_tag_and_refuses_a_different_one(orders, monkeypatch):
    boundary = {"data_interval_start": dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc), "data_interval_end": dt.datetime(2026, 1, 4, tzinfo=dt.timezone.utc)}

    def daily_tag(**kwargs):
        return ops.SnapTableCreateTagOperator(
            task_id="tag", table="orders", tag_name="{{ data_interval_start | ds }}", as_of="{{ data_interval_end }}", **kwargs
        )

    first = run(daily_tag(if_exists="skip"), **boundary)
    assert "skipped" not in first and first["result"]["snapshot_id"] == 3
    # A re-run of the same day: the tag exists at the requested snapshot -> its info, marked skipped.
    again = run(daily_tag(if_exists="skip"), **boundary)
    assert again["skipped"] is True and again["result"] == first["result"]
    assert run(ops.SnapTableCreateTagOperator(task_id="t", table="orders", tag_name="2026-01-03", snapshot_id=3, if_exists="skip"))["skipped"]
    # Same name, another snapshot: a clear failure, the tag unchanged.
    with pytest.raises(TagAlreadyExistsError, match="points at snapshot 3, not at the requested snapshot 5"):
        run(ops.SnapTableCreateTagOperator(task_id="t", table="orders", tag_name="2026-01-03", snapshot_id=5, if_exists="skip"))
    with pytest.raises(TagAlreadyExistsError, match="points at snapshot 3, not at the requested snapshot 6"):
        run(ops.SnapTableCreateTagOperator(task_id="t", table="orders", tag_name="2026-01-03", if_exists="skip"))  # the latest
    assert [(t.name, t.snapshot_id) for t in orders.tags()] == [("2026-01-03", 3)]

    # Atomic: the skip follows core's "exists already" answer to the create, never a check before it.
    from airflow_snaptable.core.native.tags import TagManager

    reads = []
    real_tag = TagManager.tag
    monkeypatch.setattr(TagManager, "tag", lambda self, name: reads.append(name) or real_tag(self, name))
    run(daily_tag(if_exists="skip"), **boundary)
    run(ops.SnapTableCreateTagOperator(task_id="t", table="orders", tag_name="fresh", snapshot_id=4, if_exists="skip"))
    assert reads == ["2026-01-03"]  # only after the create of the existing tag failed; none for "fresh"


def test_delete_tag_and_expire_tags(orders):
    orders.create_tag("keep", snapshot_id=2)
    orders.clock = lambda: T0
    orders.create_tag("short", snapshot_id=3, time_retained="1 h")
    assert run(ops.SnapTableExpireTagsOperator(task_id="x", table="orders"))["result"] == ["short"]
    assert run(ops.SnapTableDeleteTagOperator(task_id="d", table="orders", tag_name="{{ params.t }}"), params={"t": "keep"})["action"] == "delete-tag"
    assert orders.tags() == []


def test_periodic_tags(orders):
    result = run(ops.SnapTablePeriodicTagOperator(task_id="p", table="orders", period="daily", catch_up=True, num_retained_max="3"))
    names = [t.name for t in orders.tags()]
    assert len(names) == 3 and result["action"] == "periodic-tags"


def test_rollback_to_tag_and_consumers(orders):
    orders.create_tag("good", snapshot_id=4)
    orders.update_consumer("reader", 7)
    with pytest.raises(InvalidArgumentError, match="consumers have read past"):
        run(ops.SnapTableRollbackOperator(task_id="r", table="orders", tag="good"))
    result = run(ops.SnapTableRollbackOperator(task_id="r", table="orders", tag="{{ params.tag }}", force="{{ params.force }}"), params={"tag": "good", "force": True})
    assert result["result"]["discarded_snapshot_ids"] == [5, 6]
    assert orders.latest_snapshot().id == 4
    assert orders.consumer("reader").next_snapshot == 5


def test_remove_orphan_files_is_a_dry_run_unless_told(orders, root):
    stray = os.path.join(orders.uri, "data", "stray.parquet")
    os.makedirs(os.path.dirname(stray), exist_ok=True)
    with open(stray, "wb") as handle:
        handle.write(b"x")
    old = time.time() - 3 * 86400
    os.utime(stray, (old, old))
    listed = run(ops.SnapTableRemoveOrphanFilesOperator(task_id="o", table="orders", older_than="1 d"))
    assert listed["result"]["orphan_files"] == ["data/stray.parquet"] and os.path.exists(stray)
    deleted = run(ops.SnapTableRemoveOrphanFilesOperator(task_id="o", table="orders", older_than="1 d", dry_run=False))
    # XCom stays small: a deleting run returns counts and bytes, the paths only when asked (list_files).
    assert deleted["result"]["orphan_count"] == 1 and deleted["result"]["orphan_files"] == [] and not os.path.exists(stray)
    assert deleted["result"]["bytes"] == 1
    for _ in range(2):
        with open(stray, "wb") as handle:
            handle.write(b"x")
        os.utime(stray, (old, old))
    listed = run(ops.SnapTableRemoveOrphanFilesOperator(task_id="o", table="orders", older_than="1 d", dry_run=False, list_files=True))
    assert listed["result"]["orphan_files"] == ["data/stray.parquet"] and not os.path.exists(stray)


def test_compact(root):
    table = Table.create(f"{root}/small", SCHEMA, partition_by=["p"])
    for i in range(3):
        table.append(make_rows(range(i * 3, i * 3 + 3), partitions=1))
    result = run(ops.SnapTableCompactOperator(task_id="c", table="small", partitions=[{"p": 0}], min_file_num="2"))
    assert result["action"] == "compact" and table.latest_snapshot().commit_kind.value == "COMPACT"


def test_compact_and_rewrite_manifests_of_an_iceberg_table(tmp_path, monkeypatch):
    import pyarrow as pa

    from tests.iceberg.conftest import IcebergEnv, SCHEMA as ICEBERG_SCHEMA

    (tmp_path / "iceberg").mkdir()
    env = IcebergEnv({"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/iceberg"},
                     str(tmp_path / "iceberg"))
    table = env.create()
    for i in range(5):
        table.append(pa.table({"p": ["a"], "id": [i]}, schema=ICEBERG_SCHEMA))
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(extra={"catalog": env.properties}))
    planned = run(ops.SnapTableCompactOperator(task_id="c", table="iceberg://db.orders", dry_run="{{ params.dry }}"), params={"dry": "True"})
    assert planned["result"]["dry_run"] and planned["result"]["snapshot_id"] is None
    done = run(ops.SnapTableCompactOperator(task_id="c", table="iceberg://db.orders", min_input_files=5))
    assert done["result"]["snapshot_id"] == table.refresh().metadata.current_snapshot_id
    rewritten = run(ops.SnapTableRewriteManifestsOperator(task_id="m", table="iceberg://db.orders"))
    assert rewritten["action"] == "rewrite-manifests" and rewritten["result"]["manifests_after"] == 1
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == list(range(5))


def test_advance_consumer_from_the_sensors_xcom(orders):
    op = ops.SnapTableAdvanceConsumerOperator(
        task_id="a", table="orders", consumer_id="{{ params.consumer }}", next_snapshot="{{ params.new['to_snapshot_id'] + 1 }}"
    )
    result = run(op, params={"consumer": "reader", "new": {"to_snapshot_id": 6}})
    assert result["action"] == "update-consumer" and result["result"]["next_snapshot"] == 7
    assert orders.consumer("reader").next_snapshot == 7
    # Out of [earliest, latest + 1]: core's typed error, the consumer unchanged.
    with pytest.raises(InvalidArgumentError):
        run(ops.SnapTableAdvanceConsumerOperator(task_id="a", table="orders", consumer_id="reader", next_snapshot=9))
    assert orders.consumer("reader").next_snapshot == 7


def test_advance_consumer_runs_through_the_spark_job(orders, monkeypatch):
    """runner="spark": the operator hands core's update-consumer action to the hook's spark path."""
    calls = []

    def fake_run_spark(self, action, storage_options, *args):
        from airflow_snaptable.core.actions import action_from_json, run_action

        calls.append(action.to_json())
        return run_action(action_from_json(action.to_json()))  # what the job does with the action file

    monkeypatch.setattr("airflow_snaptable.hooks.snaptable.SnapTableHook._run_spark", fake_run_spark)
    op = ops.SnapTableAdvanceConsumerOperator(task_id="a", table="orders", consumer_id="reader", next_snapshot="{{ params.n }}", runner="spark")
    result = run(op, params={"n": 4})
    assert calls and '"action": "update-consumer"' in calls[0]
    assert result["result"]["next_snapshot"] == 4 and orders.consumer("reader").next_snapshot == 4


# -- parse-time errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", retain_min=0), "retain_min must be an integer >= 1"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", retain_max="many"), "retain_max must be an integer"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", older_than="2026-01-01", time_retained="1 d"), "only one of"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", dry_run="yes"), "dry_run must be true or false"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table=""), "table must be a non-empty string"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", runner="emr"), "runner must be one of"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", runner="spark", spark_submit_kwargs={"conf": {}}), "may not set"),
        (lambda: ops.SnapTableExpireSnapshotsOperator(task_id="t", table="x", spark_submit_kwargs={"deploy_mode": "clustr"}), "deploy_mode must be .client. or .cluster."),
        (lambda: ops.SnapTableCreateTagOperator(task_id="t", table="x", tag_name=""), "tag_name"),
        (lambda: ops.SnapTableCreateTagOperator(task_id="t", table="x", tag_name="a", snapshot_id=3, as_of="2026-01-01"), "only one of"),
        (lambda: ops.SnapTableCreateTagOperator(task_id="t", table="x", tag_name="a", if_exists="replace"), "if_exists"),
        (lambda: ops.SnapTableRollbackOperator(task_id="t", table="x"), "give one of snapshot_id, tag, as_of"),
        (lambda: ops.SnapTableRollbackOperator(task_id="t", table="x", snapshot_id=1, tag="a"), "only one of"),
        (lambda: ops.SnapTableCompactOperator(task_id="t", table="x", partitions=["p=1"]), "list of dicts"),
        (lambda: ops.SnapTableCompactOperator(task_id="t", table="x", min_file_num=1), "min_file_num must be an integer >= 2"),
        (lambda: ops.SnapTableAdvanceConsumerOperator(task_id="t", table="x", consumer_id="c", next_snapshot=None), "next_snapshot is required"),
        (lambda: ops.SnapTableAdvanceConsumerOperator(task_id="t", table="x", consumer_id="", next_snapshot=1), "consumer_id must be a non-empty"),
        (lambda: ops.SnapTableAdvanceConsumerOperator(task_id="t", table="x", consumer_id="c", next_snapshot=0), "next_snapshot must be an integer >= 1"),
        (lambda: ops.SnapTablePeriodicTagOperator(task_id="t", table="x", num_retained_max=0), "num_retained_max must be an integer >= 1"),
    ],
)
def test_bad_arguments_fail_when_the_dag_is_parsed(make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make()


def test_bad_rendered_values_fail_at_the_start_of_execute(orders):
    op = ops.SnapTableExpireSnapshotsOperator(task_id="t", table="orders", retain_min="{{ params.n }}")
    with pytest.raises(InvalidArgumentError, match="retain_min must be an integer"):
        run(op, params={"n": "lots"})
    assert [s.id for s in orders.snapshots()] == [1, 2, 3, 4, 5, 6]


def test_spark_runner_operator_passes_its_settings(monkeypatch, orders):
    calls = []

    def fake_run_action(self, action, **kwargs):
        calls.append((action, kwargs))
        return {"action": action.name, "table": action.table, "result": {}}

    monkeypatch.setattr("airflow_snaptable.hooks.snaptable.SnapTableHook.run_action", fake_run_action)
    op = ops.SnapTableExpireSnapshotsOperator(
        task_id="t", table="orders", retain_max=3, runner="spark", spark_conn_id="spark_x", spark_conf={"spark.a": "{{ params.v }}"},
        spark_submit_kwargs={"driver_memory": "2g"}, runner_ship="none", spark_connect_timeout=3,
    )
    run(op, params={"v": "b"})
    (action, kwargs), = calls
    assert action.retain_max == 3 and action.table == orders.uri
    assert kwargs == {
        "runner": "spark", "spark_conn_id": "spark_x", "spark_conf": {"spark.a": "b"}, "spark_submit_kwargs": {"driver_memory": "2g"},
        "runner_ship": "none", "spark_connect_timeout": 3,
    }
