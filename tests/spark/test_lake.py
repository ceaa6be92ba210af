"""A lake maintained in one Spark application (airflow_snaptable/spark/lake.py), on local[2].

The same mixed lake (our tables and a Paimon warehouse side by side, plus a broken table) is
maintained in process (core's ``maintain``) and in Spark, on the executors and on the driver:
every table ends in the same state with the same statuses, the broken one ``Failed`` alone,
and pypaimon reads the Paimon tables back.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from airflow_snaptable.core.errors import InvalidArgumentError, InvalidPolicyError
from airflow_snaptable.core.lake import FAILED, SUCCESSFUL, LakeTable, Policy, lake_status, list_tables, maintain
from airflow_snaptable.spark.lake import LakeJob, run_lake
from tests.lake.conftest import NATIVE_SNAPSHOTS, NATIVE_TABLES, PAIMON_TABLES, make_mixed_lake, native_dir, write_native
from tests.lake.conftest import iceberg_lake  # noqa: F401 - the fixture
from tests.paimon.test_paimon_lifecycle import check as check_paimon

POLICY = {
    "defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}, "consumer-expiry": {},
                 "tag-expiry": {}},
    "tables": {"sales.returns": {"snapshot-expiry": {"enabled": False}}},
}


def _broken_lake(paimon, root) -> str:
    root.mkdir()
    lake = make_mixed_lake(paimon, root).path
    write_native(native_dir(lake, "sales.broken"))
    with open(os.path.join(native_dir(lake, "sales.broken"), "snapshot", "snapshot-2"), "w") as f:
        f.write("{not json")
    return lake


def _outcome(tables: list[dict]) -> dict:
    """Per table and job: the status, what it did, and the first words of a failure."""
    keep = ("status", "snapshotsExpired", "filesDeleted", "arguments")
    return {
        t["table"]: {job: {**{k: r.get(k) for k in keep}, "failure": (r.get("failureMessage") or "").split(":")[0]}
                     for job, r in t["jobs"].items()}
        for t in tables
    }


@pytest.mark.parametrize("mode", ["executors", "driver"])
def test_one_application_maintains_a_mixed_lake_as_in_process_and_a_broken_table_fails_alone(spark, paimon, tmp_path, mode):
    in_process, in_spark = _broken_lake(paimon, tmp_path / "process"), _broken_lake(paimon, tmp_path / "spark")
    expected = maintain(in_process, Policy.from_mapping(POLICY), parallel=2)

    job = LakeJob(tuple(list_tables(in_spark)), Policy.from_mapping(POLICY), run_id="dag/run-1", parallel=2, mode=mode)
    done = run_lake(spark, LakeJob.from_dict(job.to_dict()), None, None)  # through its JSON form, as the job reads it

    assert done["mode"] == mode and (done["sparkTasks"] == 2 if mode == "executors" else done["sparkTasks"] == 0)
    names = [t["table"] for t in done["tables"]]
    assert names == sorted([*NATIVE_TABLES, *PAIMON_TABLES, "sales.broken"])
    assert _outcome(done["tables"]) == _outcome(expected.to_dict()["tables"])
    by_name = {t["table"]: t["jobs"] for t in done["tables"]}
    assert by_name["sales.broken"]["snapshot-expiry"]["status"] == FAILED
    assert "CorruptMetadataError" in by_name["sales.broken"]["snapshot-expiry"]["failureMessage"]
    assert by_name["sales.orders"]["snapshot-expiry"]["status"] == SUCCESSFUL
    assert by_name["sales.orders"]["snapshot-expiry"]["snapshotsExpired"] == NATIVE_SNAPSHOTS - 2
    assert all(j["runId"] == "dag/run-1" for t in by_name.values() for j in t.values() if "runId" in j)

    # Stored with each table, as in process: any process reads it.
    stored = {t.table: t.jobs["snapshot-expiry"]["status"] for t in lake_status(in_spark).tables}
    assert stored == {t.table: t.jobs["snapshot-expiry"]["status"] for t in lake_status(in_process).tables}
    assert stored["sales.broken"] == FAILED and stored["db.app"] == SUCCESSFUL
    check_paimon(paimon, in_spark, "app", [5, 6], ["t2", "t4"])  # pypaimon reads what Spark's run left
    shutil.rmtree(in_process)


def test_an_empty_lake_starts_no_spark_job_and_auto_keeps_a_small_lake_on_the_driver(spark, tmp_path):
    done = run_lake(spark, LakeJob((), Policy.from_mapping(POLICY), mode="executors"))
    assert done == {"tables": [], "mode": "executors", "sparkTasks": 0, "seconds": 0.0}
    assert run_lake(spark, LakeJob((), Policy.from_mapping(POLICY)))["mode"] == "driver"  # "auto", the default


@pytest.mark.parametrize(
    "doc, error, match",
    [
        ({"tables": []}, InvalidArgumentError, "lake job is"),
        ({"lake": {"tables": [], "policy": {}, "tabels": []}}, InvalidArgumentError, "unknown key.*tabels"),
        ({"lake": {"tables": "a", "policy": {}}}, InvalidArgumentError, "tables must be a list"),
        ({"lake": {"tables": [], "policy": {}, "mode": "cluster"}}, InvalidArgumentError, "mode must be one of"),
        ({"lake": {"tables": [], "policy": {}, "parallel": 0}}, InvalidArgumentError, "parallel must be"),
        ({"lake": {"tables": [{"name": "a"}], "policy": {}}}, InvalidArgumentError, "a lake table is"),
        ({"lake": {"tables": [], "policy": {"defaults": {"snapshot-expire": {}}}}}, InvalidPolicyError, "snapshot-expire"),
    ],
)
def test_a_bad_lake_document_is_refused_before_spark_starts(doc, error, match):
    with pytest.raises(error, match=match):
        LakeJob.from_dict(doc)


def test_the_lake_document_round_trips():
    job = LakeJob((LakeTable("a.b", "snaptable", "/x/a/b"),), Policy.from_mapping(POLICY), "r", True, 3, "driver", 60.0)
    assert LakeJob.from_dict(job.to_dict()) == job


def test_an_iceberg_catalog_is_maintained_on_the_executors_and_pyiceberg_reads_it_back(spark, iceberg_lake):
    from tests.lake.conftest import ICEBERG_SNAPSHOTS, ICEBERG_TABLES, iceberg_reads

    before = iceberg_reads(iceberg_lake)
    catalog = iceberg_lake.properties
    tables = tuple(list_tables("iceberg://", catalog=catalog))
    done = run_lake(spark, LakeJob(tables, Policy.from_mapping(POLICY), mode="executors", parallel=2), None, catalog)
    assert done["mode"] == "executors" and [t["table"] for t in done["tables"]] == sorted(ICEBERG_TABLES)
    by_name = {t["table"]: t["jobs"] for t in done["tables"]}
    assert {name: jobs["snapshot-expiry"]["status"] for name, jobs in by_name.items()} == {
        name: "Disabled" if name == "sales.returns" else SUCCESSFUL for name in ICEBERG_TABLES}
    after = iceberg_reads(iceberg_lake)
    for name in ICEBERG_TABLES:
        assert len(after[name]["snapshots"]) == (ICEBERG_SNAPSHOTS if name == "sales.returns" else 2), name
        for snapshot_id, rows in after[name]["snapshots"].items():
            assert rows == before[name]["snapshots"][snapshot_id], (name, snapshot_id)
    stored = {t.table: t.jobs["snapshot-expiry"]["status"] for t in lake_status("iceberg://", catalog=catalog).tables}
    assert stored == {name: jobs["snapshot-expiry"]["status"] for name, jobs in by_name.items()}


def test_the_lake_operator_reports_every_table_then_fails_on_the_broken_one(spark, paimon, tmp_path, monkeypatch):
    """SnapTableMaintainLakeOnSparkOperator with the lake job run in this test's Spark session (only spark-submit
    is left out; tests/airflow/test_spark_lake_dag.py runs it for real): every table's result, asset event and
    lineage, then the task fails naming the table whose job failed."""
    from airflow.sdk import AssetAlias
    from airflow.sdk.exceptions import AirflowException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_snaptable.hooks.spark_submit import SparkSubmitRunner
    from airflow_snaptable.operators.lake import LAKE_ASSET_ALIAS, SnapTableMaintainLakeOnSparkOperator
    from tests.airflow.conftest import snaptable_conn

    lake = _broken_lake(paimon, tmp_path / "root")
    monkeypatch.setenv("AIRFLOW_CONN_SNAPTABLE_DEFAULT", snaptable_conn(str(tmp_path / "root")))
    submitted = []

    def run_lake_here(self, lake_job, storage_options, catalog=None):
        submitted.append(lake_job)
        return json.loads(json.dumps(run_lake(spark, LakeJob.from_dict(lake_job), storage_options, catalog)))

    monkeypatch.setattr(SparkSubmitRunner, "run_lake", run_lake_here)
    tables = [t.to_dict() for t in list_tables(lake)]
    op = SnapTableMaintainLakeOnSparkOperator(task_id="maintain_tables", tables=tables, policy=POLICY, location="lake",
                                              spark_lake_mode="driver")
    events = OutletEventAccessors()
    with pytest.raises(AirflowException, match=r"jobs failed on 1 of 8 table\(s\).*sales\.broken.*CorruptMetadataError"):
        op.execute({"run_id": "manual__1", "outlet_events": events})
    (job,) = submitted
    assert job["lake"]["runId"] == "adhoc_airflow/manual__1" and len(job["lake"]["tables"]) == 8
    alias_events = events[AssetAlias(LAKE_ASSET_ALIAS)].asset_alias_events
    assert len(alias_events) == 8
    assert {e.extra["table"]: e.extra["jobs"]["snapshot-expiry"] for e in alias_events}["sales.broken"] == FAILED
    lineage = op.get_openlineage_facets_on_complete(None)
    assert len(lineage.outputs) == 8 and len(lineage.inputs) == 8
