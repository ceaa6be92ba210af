"""The provider's public names stay: a DAG, a serialized trigger or a hook call that imports one keeps working.

Every public name of the operators, sensors, triggers and hooks modules is listed here. Removing one
from the package fails ``test_no_public_name_is_removed``: a public name is never removed without a
deprecation (keep it, warn when it is used, say in docs/airflow.md what replaces it, and remove it
only in a later major release, taking it off this list then). A new public name fails
``test_every_public_name_is_listed`` until it is listed, so it is guarded from then on.

Public: the ``__all__`` of a package (``airflow_snaptable.operators``), and every name a module defines
at its top level without a leading underscore (classes, functions, constants, the aliases of classes);
names a module only imports are the defining module's.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

PUBLIC: dict[str, list[str]] = {
    "airflow_snaptable.operators": [
        "SnapTableAdvanceConsumerOperator", "SnapTableBaseOperator", "SnapTableCleanOperator", "SnapTableCompactOperator",
        "SnapTableCreateSavepointOperator", "SnapTableCreateTagOperator", "SnapTableDeleteSavepointOperator",
        "SnapTableDeleteTagOperator", "SnapTableExpireConsumersOperator", "SnapTableExpireDataOperator",
        "SnapTableExpireSnapshotsOperator", "SnapTableExpireTagsOperator", "SnapTablePeriodicTagOperator",
        "SnapTablePurgeOperator", "SnapTableRemoveOrphanFilesOperator", "SnapTableRenameTagOperator",
        "SnapTableRestoreSavepointOperator", "SnapTableRewriteManifestsOperator", "SnapTableRollbackOperator",
        "SnapTableUndoOperator",
        # the short names the package was specified with
        "AdvanceConsumerOperator", "CompactOperator", "CreateTagOperator", "DeleteTagOperator", "ExpireConsumersOperator",
        "ExpireTagsOperator", "PeriodicTagOperator", "RemoveOrphanFilesOperator", "RollbackOperator", "SnapshotExpireOperator",
    ],
    "airflow_snaptable.operators.snaptable": [
        "SnapTableAdvanceConsumerOperator", "SnapTableBaseOperator", "SnapTableCleanOperator", "SnapTableCompactOperator",
        "SnapTableCreateSavepointOperator", "SnapTableCreateTagOperator", "SnapTableDeleteSavepointOperator",
        "SnapTableDeleteTagOperator", "SnapTableExpireConsumersOperator", "SnapTableExpireDataOperator",
        "SnapTableExpireSnapshotsOperator", "SnapTableExpireTagsOperator", "SnapTablePeriodicTagOperator",
        "SnapTablePurgeOperator", "SnapTableRemoveOrphanFilesOperator", "SnapTableRenameTagOperator",
        "SnapTableRestoreSavepointOperator", "SnapTableRewriteManifestsOperator", "SnapTableRollbackOperator",
        "SnapTableUndoOperator",
        "AdvanceConsumerOperator", "CompactOperator", "CreateTagOperator", "DeleteTagOperator", "ExpireConsumersOperator",
        "ExpireTagsOperator", "PeriodicTagOperator", "RemoveOrphanFilesOperator", "RollbackOperator", "SnapshotExpireOperator",
    ],
    "airflow_snaptable.operators.lake": [
        "LAKE_ASSET_ALIAS", "SnapTableListLakeTablesOperator", "SnapTableMaintainLakeOnSparkOperator",
        "SnapTableMaintainTableOperator", "lake_maintenance_group",
    ],
    "airflow_snaptable.operators.links": ["LakeHealthLink", "PLUGIN_PREFIX", "TableTimelineLink", "plugin_url"],
    "airflow_snaptable.sensors": ["NewSnapshotSensor", "SnapTableNewSnapshotSensor"],
    "airflow_snaptable.sensors.snaptable": ["NewSnapshotSensor", "SnapTableNewSnapshotSensor"],
    "airflow_snaptable.triggers": ["NewSnapshotTrigger", "SnapTableNewSnapshotTrigger", "SnapTableSnapshotEventTrigger", "SnapshotEventTrigger"],
    "airflow_snaptable.triggers.snaptable": [
        "MAX_CONSECUTIVE_ERRORS", "NewSnapshotTrigger", "POSITION_KEY", "SnapTableNewSnapshotTrigger",
        "SnapTableSnapshotEventTrigger", "SnapshotEventTrigger", "aget_connection_settings", "is_fatal",
    ],
    "airflow_snaptable.hooks": ["SnapTableHook"],
    "airflow_snaptable.hooks.snaptable": [
        "CONN_TYPE", "ConnectionSettings", "DEFAULT_CONN_ID", "SnapTableHook", "describe_options", "is_full_uri",
        "join_table_uri", "mask_secrets", "secret_values",
    ],
}


def defined_public_names(module_name: str) -> set[str]:
    """The public names ``module_name`` has: its ``__all__`` for a package, else what its top level defines."""
    module = importlib.import_module(module_name)
    if module.__name__.count(".") == 1:  # a package: airflow_snaptable.operators
        return set(module.__all__)
    tree = ast.parse(inspect.getsource(module))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_no_public_name_is_removed(module_name):
    module = importlib.import_module(module_name)
    gone = sorted(n for n in PUBLIC[module_name] if not hasattr(module, n))
    assert not gone, (
        f"{module_name} no longer has the public name(s) {gone}: DAGs, serialized triggers and hook calls import "
        f"them. Deprecate first (keep the name, warn when it is used, document its replacement in docs/airflow.md); "
        f"never remove a public name without a deprecation"
    )
    if module_name.count(".") == 1:
        left_out = sorted(set(PUBLIC[module_name]) - set(module.__all__))
        assert not left_out, f"{module_name}.__all__ dropped {left_out}: deprecate first, never remove a public name"


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_every_public_name_is_listed(module_name):
    unlisted = sorted(defined_public_names(module_name) - set(PUBLIC[module_name]))
    assert not unlisted, f"{module_name}: new public name(s) {unlisted}: add them to PUBLIC here, so they are guarded"


def test_every_operator_sensor_trigger_and_hook_module_is_listed():
    """The modules the provider info names (and their packages) are all guarded."""
    from airflow_snaptable.get_provider_info import get_provider_info

    info = get_provider_info()
    modules = {m for kind in ("operators", "sensors", "triggers", "hooks") for entry in info[kind] for m in entry["python-modules"]}
    modules |= {m.rsplit(".", 1)[0] for m in modules}
    assert modules <= set(PUBLIC), sorted(modules - set(PUBLIC))
