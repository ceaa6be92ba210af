"""Sensors for snapshot tables."""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException

from airflow_snaptable.core.arguments.checks import check_bool, check_int, value_from_text
from airflow_snaptable.core.errors import InvalidArgumentError, TableNotFoundError
from airflow_snaptable.core.incremental import (
    DATA_COMMIT_KINDS,
    PositionWatch,
    consumer_baseline,
    find_new_snapshots,
    normalize_commit_kinds,
)
from airflow_snaptable.hooks.snaptable import DEFAULT_CONN_ID, SnapTableHook
from airflow_snaptable.operators.links import TableTimelineLink
from airflow_snaptable.operators.task_errors import errors_naming_task
from airflow_snaptable.triggers.snaptable import SnapTableNewSnapshotTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_snaptable.core.table import Table


class SnapTableNewSnapshotSensor(BaseSensorOperator):
    """
    Wait until a table has snapshots newer than a baseline, and return the new range.

    The baseline is ``after_snapshot_id``, or a consumer's position (its next snapshot - 1; a
    consumer that does not exist yet starts before snapshot 1). The sensor is done once a
    snapshot after the baseline has a kind in ``commit_kinds``; it returns (to XCom) the range
    ``{table, from_snapshot_id, to_snapshot_id, snapshot_ids, commit_kinds,
    matching_snapshot_ids, added_records, deleted_records}``: ``table.changes(from, to)`` reads
    exactly those changes, and ``SnapTableAdvanceConsumerOperator(next_snapshot=to_snapshot_id + 1)``
    commits them once downstream work succeeded.

    The table logic is core's (:func:`airflow_snaptable.core.incremental.find_new_snapshots`).
    A poke when nothing is new costs O(1) storage operations (the LATEST hint, checked).

    :param table: A full URI, or a name under the connection's root. (templated)
    :param after_snapshot_id: Snapshots after this id are new (0: any snapshot). A fixed id suits a
        one-off wait only: in a DAG that runs again it finds the same snapshots every run, and once
        expiry removes that snapshot (the DAG's own expiry, or the table's history being long) the
        sensor fails with ``SnapshotNotFoundError``. A recurring DAG waits on ``consumer_id``. (templated)
    :param consumer_id: Or: snapshots the consumer has not read yet are new; the DAG moves the consumer
        on after its work (``SnapTableAdvanceConsumerOperator``), and expiry keeps what it has not read.
        (templated)
    :param commit_kinds: Kinds that count (default APPEND, OVERWRITE, DELETE: compactions
        change no rows and are ignored); ``None`` counts every kind.
    :param ref: An Iceberg table's branch or tag to follow instead of ``main``; positions are then
        that ref's data sequence numbers (docs/iceberg.md). Other tables have none. (templated)
    :param snaptable_conn_id: The snaptable connection. (templated)
    :param deferrable: Wait in the triggerer (``SnapTableNewSnapshotTrigger``) instead of a worker slot.
    :param wait_for_table: A table that does not exist yet is waited for like one without new
        snapshots (a pipeline that creates it later); False: it fails the task at once.
    """

    template_fields: Sequence[str] = ("table", "snaptable_conn_id", "after_snapshot_id", "consumer_id", "ref")
    operator_extra_links = (TableTimelineLink(),)
    ui_color = "#c9e4f6"

    def __init__(
        self,
        *,
        table: str,
        after_snapshot_id: int | str | None = None,
        consumer_id: str | None = None,
        commit_kinds: Iterable[str] | None = DATA_COMMIT_KINDS,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        wait_for_table: bool = True,
        ref: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise InvalidArgumentError(f"{self.task_id}: table must be a non-empty string (a URI or a name), got {table!r}")
        if (after_snapshot_id is None) == (consumer_id is None):
            raise InvalidArgumentError(f"{self.task_id}: give exactly one of after_snapshot_id and consumer_id")
        if after_snapshot_id is not None and not isinstance(after_snapshot_id, str):  # text may be a template: read at run time
            with errors_naming_task(self.task_id):
                _as_snapshot_id(after_snapshot_id)
        self.table = table
        self.after_snapshot_id = after_snapshot_id
        self.consumer_id = consumer_id
        if ref is not None and (not isinstance(ref, str) or not ref.strip()):
            raise InvalidArgumentError(f"{self.task_id}: ref must be a non-empty string (a branch or tag), got {ref!r}")
        self.ref = ref
        with errors_naming_task(self.task_id):
            self.commit_kinds = normalize_commit_kinds(commit_kinds)
            self.wait_for_table = check_bool(wait_for_table, "wait_for_table")
        self.snaptable_conn_id = snaptable_conn_id
        self.deferrable = deferrable
        self._baseline: int | None = None
        self._watch: PositionWatch | None = None

    @cached_property
    def hook(self) -> SnapTableHook:
        return SnapTableHook(snaptable_conn_id=self.snaptable_conn_id)

    def _table(self) -> Table | None:
        """The table, or None while it does not exist and the sensor waits for it."""
        try:
            return self.hook.get_table(self.table)
        except TableNotFoundError:
            if not self.wait_for_table:
                raise
            self.log.info("Table %s does not exist yet; waiting for it", self.hook.table_uri(self.table))
            return None

    def baseline(self) -> int:
        """The id after which snapshots are new (resolved once per try)."""
        if self._baseline is None:
            if self.consumer_id is not None:
                table = self._table()
                # A consumer of a table that does not exist yet has read nothing.
                self._baseline = 0 if table is None else consumer_baseline(table, str(self.consumer_id).strip())
            else:
                self._baseline = _as_snapshot_id(self.after_snapshot_id)
        return self._baseline

    def check(self) -> dict[str, Any] | None:
        """The new range, or None. Snapshots checked before without a match are not read again."""
        table = self._table()
        if table is None:
            return None
        if self._watch is None:  # follows the table's lineage across pokes: a rollback, a re-created table
            rebase = None
            if self.consumer_id is not None:
                rebase = lambda t: consumer_baseline(t, str(self.consumer_id).strip())  # noqa: E731
            self._watch = PositionWatch(self.baseline(), rebase)
        new = self._watch.find(table, self.commit_kinds, ref=self.ref or None)
        self._baseline = self._watch.baseline
        return new.to_dict() if new.found else None

    def poke(self, context: Context) -> PokeReturnValue:
        found = self.check()
        if found is None:
            self.log.info("No new snapshot in %s after %d", self.hook.table_uri(self.table), self.baseline())
            return PokeReturnValue(is_done=False)
        self.log.info("New snapshots in %s: (%d, %d]", found["table"], found["from_snapshot_id"], found["to_snapshot_id"])
        return PokeReturnValue(is_done=True, xcom_value=found)

    def execute(self, context: Context) -> Any:
        with errors_naming_task(self.task_id):
            return self._execute(context)

    def _execute(self, context: Context) -> Any:
        self._baseline = None
        self._watch = None
        if not self.deferrable:
            return super().execute(context)
        found = self.check()
        if found is not None:
            return found
        self.defer(
            trigger=SnapTableNewSnapshotTrigger(
                table=self.hook.table_uri(self.table),
                after_snapshot_id=self.baseline(),
                snaptable_conn_id=self.snaptable_conn_id,
                commit_kinds=self.commit_kinds,
                poke_interval=self.poke_interval,
                wait_for_table=self.wait_for_table,
                ref=self.ref or None,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event:
            raise AirflowException(f"{self.task_id}: the trigger ended without an event")
        if event.get("status") != "success":
            raise AirflowException(f"{self.task_id}: waiting for new snapshots failed: {event.get('message', event)}")
        found = {k: v for k, v in event.items() if k != "status"}
        self.log.info("New snapshots in %s: (%s, %s]", found.get("table"), found.get("from_snapshot_id"), found.get("to_snapshot_id"))
        return found


def _as_snapshot_id(value: Any) -> int:
    """``after_snapshot_id`` as given, or as its (rendered) text."""
    if isinstance(value, str):
        value = value_from_text(value, ("int",), "after_snapshot_id")
    return check_int(value, "after_snapshot_id", minimum=0)


#: The short name the package was specified with: a public name of the same class, beside the prefixed one.
NewSnapshotSensor = SnapTableNewSnapshotSensor
