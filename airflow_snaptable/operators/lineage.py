"""OpenLineage for the maintenance operators: the table as input and output dataset.

- Naming follows the OpenLineage dataset naming spec: a local table is namespace ``file``,
  name its absolute path; ``s3://bucket/a/b`` is namespace ``s3://bucket``, name ``a/b`` (``gs``,
  ``abfs``... alike); an Iceberg table ``iceberg://db.t`` is namespace ``iceberg``, name ``db.t``.
- The dataset version facet carries the table's latest snapshot id after the task.
- Expiry, orphan removal and compaction ALTER the table; a rollback OVERWRITEs its state
  (lifecycle state change facet). Tags and consumers change no data: no lifecycle facet.

Everything here is imported only when the OpenLineage provider asks (it is optional).
"""

from __future__ import annotations

from typing import Any


#: Action name -> the lifecycle state change it is (OpenLineage LifecycleStateChange member names).
LIFECYCLE_CHANGE = {
    "expire-snapshots": "ALTER",
    "remove-orphan-files": "ALTER",
    "compact": "ALTER",
    "rewrite-manifests": "ALTER",
    "rollback": "OVERWRITE",
}


def dataset_naming(table_uri: str) -> tuple[str, str]:
    """(namespace, name) of a table's dataset."""
    if table_uri.startswith("/"):
        return "file", table_uri.rstrip("/")
    protocol, rest = table_uri.split("://", 1)
    if protocol == "file":
        return "file", "/" + rest.lstrip("/").rstrip("/")
    if protocol == "iceberg":
        return "iceberg", rest
    protocol = {"s3a": "s3", "s3n": "s3"}.get(protocol, protocol)
    bucket, _, path = rest.partition("/")
    return f"{protocol}://{bucket}", path.rstrip("/")


def operator_lineage(action: str, table_uri: str, latest_snapshot_id: int | None, change: str | None = None) -> Any:
    """The ``OperatorLineage`` of one finished maintenance action (``change``: the lifecycle state change
    when the action's name does not tell it, as for a lake's jobs on a table)."""
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset,
        LifecycleStateChange,
        LifecycleStateChangeDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import dataset_version_dataset

    namespace, name = dataset_naming(table_uri)
    facets: dict[str, Any] = {}
    if latest_snapshot_id is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(latest_snapshot_id))
    inputs = [Dataset(namespace=namespace, name=name, facets=dict(facets))]
    change = change or LIFECYCLE_CHANGE.get(action)
    if change is not None:
        facets["lifecycleStateChange"] = LifecycleStateChangeDatasetFacet(lifecycleStateChange=LifecycleStateChange[change])
    return OperatorLineage(inputs=inputs, outputs=[Dataset(namespace=namespace, name=name, facets=facets)])


