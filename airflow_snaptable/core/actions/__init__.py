"""The action contract: each maintenance action defined once, and run the same way by every front end.

- ``contract.py``: what an action is (``Action``, its fields and their checks), and how JSON,
  Python values and text become one;
- ``maintenance.py``: the actions (``ExpireSnapshots``, ``CreateTag``, ``Rollback``, ...), the
  registry ``ACTIONS``, and ``action_from_json`` / ``build_action`` / ``run_action``;
- ``hudi_clean.py``: the actions of Hudi's cleaning policies and savepoints;
- ``data_expiry.py``: data expiry (rows older than a retention, by a time column).

``airflow_snaptable.core.actions`` is the public face (docs/lifecycle.md): every action and the
functions that build and run them are importable from here.

May import: ``Table`` (core/table.py: an action's ``run(table)`` calls it) and everything below
it. Nothing in core below the actions imports them; the CLI, the Spark job, the hook and the
operators are built from them.
"""

from airflow_snaptable.core.actions.contract import (
    Action,
    ActionField,
    Choice,
    Param,
    allowed,
    arg,
    check_duration,
    check_partitions,
    check_size,
    check_snapshot_ids,
    check_time,
    check_time_or_duration,
    valid_name,
)
from airflow_snaptable.core.actions.data_expiry import ExpireData
from airflow_snaptable.core.actions.hudi_clean import Clean, CreateSavepoint, DeleteSavepoint, RestoreSavepoint
from airflow_snaptable.core.actions.noncurrent import Purge, Trash, Undo
from airflow_snaptable.core.actions.maintenance import (
    ACTIONS,
    Compact,
    RewriteManifests,
    CreatePeriodicTags,
    CreateTag,
    DeleteTag,
    ExpireConsumers,
    ExpireSnapshots,
    ExpireTags,
    RemoveOrphanFiles,
    RenameTag,
    Rollback,
    UpdateConsumer,
    action_class,
    action_from_json,
    actions_from_json,
    build_action,
    run_action,
)

__all__ = [
    "Purge",
    "Trash",
    "Undo",
    "ACTIONS",
    "Action",
    "ActionField",
    "Choice",
    "Clean",
    "Compact",
    "RewriteManifests",
    "CreatePeriodicTags",
    "CreateSavepoint",
    "CreateTag",
    "DeleteSavepoint",
    "DeleteTag",
    "ExpireConsumers",
    "ExpireData",
    "ExpireSnapshots",
    "ExpireTags",
    "Param",
    "RemoveOrphanFiles",
    "RenameTag",
    "RestoreSavepoint",
    "Rollback",
    "UpdateConsumer",
    "action_class",
    "action_from_json",
    "actions_from_json",
    "allowed",
    "arg",
    "build_action",
    "check_duration",
    "check_partitions",
    "check_size",
    "check_snapshot_ids",
    "check_time",
    "check_time_or_duration",
    "run_action",
    "valid_name",
]
