"""Triggers for snapshot tables: wait for new snapshots, off the event loop.

- :class:`SnapTableNewSnapshotTrigger`: one-shot; fires once the table has (matching) snapshots
  newer than a baseline. Used by the deferrable ``SnapTableNewSnapshotSensor``.
- :class:`SnapTableSnapshotEventTrigger`: an event trigger for ``AssetWatcher``; emits one event per
  new snapshot range and keeps its position in the asset's state store, so a triggerer
  restart neither loses nor (outside a short window) repeats events.

Storage is only touched through ``asyncio.to_thread``; the connection is looked up with
``await BaseHook.aget_connection()`` (a sync lookup on the event loop raises
DeadlockImminentError in Airflow 3.3).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from airflow_snaptable.core.errors import (
    InvalidArgumentError,
    SnapshotNotFoundError,
    SnapTableError,
    StorageError,
    TableNotFoundError,
)
from airflow_snaptable.core.incremental import (
    DATA_COMMIT_KINDS,
    PositionWatch,
    WatchedPosition,
    advance_position,
    find_new_snapshots,
    normalize_commit_kinds,
    rewound_position,
)
from airflow_snaptable.hooks.snaptable import DEFAULT_CONN_ID, ConnectionSettings, join_table_uri

#: Consecutive storage failures (network, throttling) tolerated before a trigger gives up.
MAX_CONSECUTIVE_ERRORS = 5
#: Key of the position in the asset state store.
POSITION_KEY = "snaptable_position"


def is_fatal(exc: BaseException) -> bool:
    """Errors that polling again cannot fix (bad table, connection, arguments); storage hiccups are retried."""
    if isinstance(exc, StorageError):
        return False
    return isinstance(exc, (SnapTableError, AirflowException, ValueError, TypeError, LookupError))


async def aget_connection_settings(conn_id: str | None) -> ConnectionSettings:
    """The hook's connection settings from the event loop: async lookup, async masking (no DeadlockImminentError)."""
    from airflow.sdk.log import amask_secret

    if not conn_id:
        return ConnectionSettings()
    try:
        conn = await BaseHook.aget_connection(conn_id)
    except AirflowNotFoundException:
        if conn_id == DEFAULT_CONN_ID:
            return ConnectionSettings()
        raise
    settings = ConnectionSettings.from_connection(conn, await conn.aextra_dejson())
    for value in settings.secrets():
        await amask_secret(value)
    return settings


async def _open_table(table: str, snaptable_conn_id: str | None):
    from airflow_snaptable.core.table import Table

    settings = await aget_connection_settings(snaptable_conn_id)
    uri = join_table_uri(settings.root, table)
    catalog = settings.catalog_for(uri, snaptable_conn_id)
    return await asyncio.to_thread(lambda: Table.open(uri, settings.storage_options_for(uri), catalog=catalog))


async def _open_table_or_wait(trigger: BaseTrigger, table: str, snaptable_conn_id: str | None, wait: bool):
    """The table, or None while it does not exist yet and ``wait`` (logged once per trigger run)."""
    try:
        return await _open_table(table, snaptable_conn_id)
    except TableNotFoundError:
        if not wait:
            raise
        if not getattr(trigger, "_told_missing", False):
            trigger.log.info("Table %s does not exist yet; waiting for it", table)
            trigger._told_missing = True
        return None


class SnapTableNewSnapshotTrigger(BaseTrigger):
    """
    Fire once ``table`` has snapshots newer than ``after_snapshot_id`` with a kind in ``commit_kinds``.

    The event payload is ``{"status": "success", **range}`` (see
    :func:`~airflow_snaptable.core.incremental.find_new_snapshots`) or
    ``{"status": "error", "message": ...}``. A poll with nothing new costs O(1) storage reads.

    :param table: The table's full URI, or a name under the connection's root.
    :param after_snapshot_id: The baseline: snapshots after it are new.
    :param snaptable_conn_id: The snaptable connection (storage options).
    :param commit_kinds: Kinds that count (default APPEND, OVERWRITE, DELETE, as for the sensor; None: all).
    :param poke_interval: Seconds between polls.
    :param wait_for_table: Keep polling while the table does not exist yet (a pipeline that
        creates it later); False: a missing table is an error event at once.
    :param ref: An Iceberg table's branch or tag to follow instead of ``main``.
    """

    def __init__(
        self,
        table: str,
        after_snapshot_id: int,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        commit_kinds: list[str] | None = list(DATA_COMMIT_KINDS),
        poke_interval: float = 60.0,
        wait_for_table: bool = True,
        ref: str | None = None,
    ) -> None:
        super().__init__()
        self.table = table
        self.after_snapshot_id = int(after_snapshot_id)
        self.snaptable_conn_id = snaptable_conn_id
        self.commit_kinds = normalize_commit_kinds(commit_kinds)
        self.poke_interval = float(poke_interval)
        self.wait_for_table = bool(wait_for_table)
        self.ref = ref

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = {
            "table": self.table,
            "after_snapshot_id": self.after_snapshot_id,
            "snaptable_conn_id": self.snaptable_conn_id,
            "commit_kinds": self.commit_kinds,
            "poke_interval": self.poke_interval,
            "wait_for_table": self.wait_for_table,
        }
        if self.ref is not None:  # only then: triggers serialized before refs existed stay equal
            kwargs["ref"] = self.ref
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        errors = 0
        table = None
        watch = PositionWatch(self.after_snapshot_id)  # follows the table's lineage across polls (core/incremental.py)
        while True:
            try:
                if table is None:
                    table = await _open_table_or_wait(self, self.table, self.snaptable_conn_id, self.wait_for_table)
                    if table is None:
                        await asyncio.sleep(self.poke_interval)
                        continue
                new = await asyncio.to_thread(watch.find, table, self.commit_kinds, self.ref)
                found = new.to_dict() if new.found else None
                errors = 0
            except Exception as exc:  # noqa: BLE001 - storage hiccups are retried, then reported
                if is_fatal(exc):
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                errors += 1
                self.log.warning("Polling %s failed (%d/%d): %s", self.table, errors, MAX_CONSECUTIVE_ERRORS, exc)
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                found = None
            if found is not None:
                yield TriggerEvent({"status": "success", **found})
                return
            await asyncio.sleep(self.poke_interval)


class SnapTableSnapshotEventTrigger(BaseEventTrigger):
    """
    Emit one event per new snapshot range of ``table``, for ``AssetWatcher``.

    Each event's payload is the range ``{table, from_snapshot_id, to_snapshot_id, snapshot_ids,
    commit_kinds, matching_snapshot_ids, added_records, deleted_records}``; ranges of
    consecutive events join up (the next ``from`` is the previous ``to``). Snapshots whose kind
    is not in ``commit_kinds`` (by default COMPACT) are stepped over silently.

    The position (the last snapshot an event covered) lives in the asset's state store
    (``self.asset_state_store``), so after a triggerer restart the watcher continues where
    it stopped. The position is stored ``commit_delay`` seconds after an event is yielded,
    once the triggerer has persisted the event: a crash before that repeats the event
    (never loses it). If expiry removed snapshots the watcher had not reported yet (it was
    down for long), the next event starts at the earliest snapshot and carries
    ``expired_after_snapshot_id``: snapshots after that id up to ``from_snapshot_id`` went
    unreported. After a rollback below the position, the position moves back to the new latest.

    :param table: The table's full URI, or a name under the connection's root.
    :param snaptable_conn_id: The snaptable connection (storage options).
    :param commit_kinds: Kinds that fire an event (default APPEND, OVERWRITE, DELETE; None: all).
    :param poke_interval: Seconds between polls.
    :param start_after_snapshot_id: Where a watcher without stored position starts
        (default: the latest snapshot when it first runs: history is not replayed; a table
        created while the watcher waited for it is reported from its first snapshot).
    :param with_changes: Add the net added/deleted record counts (reads the delta manifests).
    :param commit_delay: Seconds between yielding an event and storing the new position.
    :param wait_for_table: Keep polling while the table does not exist yet; False: a missing
        table stops the watcher with the error.
    :param position_asset: The name of the asset whose state holds the position, needed only
        when one trigger watches for several assets (the triggerer then gives it several).
    """

    def __init__(
        self,
        table: str,
        snaptable_conn_id: str | None = DEFAULT_CONN_ID,
        commit_kinds: list[str] | None = list(DATA_COMMIT_KINDS),
        poke_interval: float = 30.0,
        start_after_snapshot_id: int | None = None,
        with_changes: bool = True,
        commit_delay: float = 5.0,
        wait_for_table: bool = True,
        position_asset: str | None = None,
    ) -> None:
        super().__init__()
        self.table = table
        self.snaptable_conn_id = snaptable_conn_id
        self.commit_kinds = normalize_commit_kinds(commit_kinds)
        self.poke_interval = float(poke_interval)
        self.start_after_snapshot_id = None if start_after_snapshot_id is None else int(start_after_snapshot_id)
        self.with_changes = bool(with_changes)
        self.commit_delay = float(commit_delay)
        self.wait_for_table = bool(wait_for_table)
        self.position_asset = position_asset
        self._memory_state: dict[str, Any] | None = None
        self._watched: WatchedPosition | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "snaptable_conn_id": self.snaptable_conn_id,
                "commit_kinds": self.commit_kinds,
                "poke_interval": self.poke_interval,
                "start_after_snapshot_id": self.start_after_snapshot_id,
                "with_changes": self.with_changes,
                "commit_delay": self.commit_delay,
                "wait_for_table": self.wait_for_table,
                "position_asset": self.position_asset,
            },
        )

    # -- position in the asset state store ----------------------------------------------

    def _accessor(self) -> Any:
        """Where the position is kept: the watched asset's state (None: in memory, e.g. in tests)."""
        store = self.asset_state_store
        if store is None:
            return None
        if self.position_asset is not None:
            from airflow.sdk import Asset

            return store[Asset.ref(name=self.position_asset)]
        return store  # one watched asset: the accessors answer aget/aset themselves

    async def load_position(self, uri: str) -> int | None:
        accessor = self._accessor()
        if accessor is None:
            state = self._memory_state
        else:
            try:
                state = await accessor.aget(POSITION_KEY)
            except ValueError as exc:  # the accessors of several assets do not pick one themselves
                raise InvalidArgumentError(
                    f"this watcher of {self.table} serves several assets: give SnapTableSnapshotEventTrigger "
                    f"position_asset=<the name of the asset that keeps its position> ({exc})"
                ) from None
        if isinstance(state, dict) and state.get("table") == uri and state.get("last_snapshot_id") is not None:
            self._watched = WatchedPosition.from_state(int(state["last_snapshot_id"]), state.get("lineage"))
            return int(state["last_snapshot_id"])
        return None

    async def save_position(self, uri: str, snapshot_id: int) -> None:
        state: dict[str, Any] = {"table": uri, "last_snapshot_id": int(snapshot_id)}
        watched = self._watched
        if watched is not None and watched.id == int(snapshot_id):  # the lineage it was reached along (core/incremental.py)
            state["lineage"] = watched.to_state()
        accessor = self._accessor()
        if accessor is None:
            self._memory_state = state
        else:
            await accessor.aset(POSITION_KEY, state)

    # -- polling ---------------------------------------------------------------------------

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = None
        while table is None:
            table = await _open_table_or_wait(self, self.table, self.snaptable_conn_id, self.wait_for_table)
            if table is None:
                await asyncio.sleep(self.poke_interval)
        uri = table.uri
        position = await self.load_position(uri)
        if position is None:
            position = self.start_after_snapshot_id
            if position is None and getattr(self, "_told_missing", False):
                position = 0  # the table appeared while watched: all of its history is new
            if position is None:
                position = await asyncio.to_thread(table.snapshot_manager.latest_id) or 0
            watched = await asyncio.to_thread(advance_position, table, None, position)
            self._watched = watched
            await self.save_position(uri, position)
            self.log.info("Watching %s from snapshot %d (no stored position)", uri, position)
        else:
            # A position stored before its lineage was kept: the lineage it is in now.
            watched = self._watched or await asyncio.to_thread(advance_position, table, None, position)
            self.log.info("Watching %s from stored position: snapshot %d", uri, position)
        errors = 0
        while True:
            try:
                found, checked = await asyncio.to_thread(self._poll, table, position)
                # After the poll (it reads an Iceberg table's metadata anew): did the position leave the lineage?
                rewound = await asyncio.to_thread(rewound_position, table, watched)
                errors = 0
            except Exception as exc:  # noqa: BLE001 - storage hiccups: retry, give up after a few
                if is_fatal(exc):
                    raise
                errors += 1
                self.log.warning("Polling %s failed (%d/%d): %s", uri, errors, MAX_CONSECUTIVE_ERRORS, exc)
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    raise
                await asyncio.sleep(self.poke_interval)
                continue
            if rewound is not None:  # what the poll found was counted from a position no longer in the lineage
                watched, why = rewound
                self.log.warning("%s: position %d is no longer in the table's lineage (%s): continuing from %d",
                                 uri, position, why, watched.id)
                position = watched.id
                self._watched = watched
                await self.save_position(uri, position)
                await asyncio.sleep(self.poke_interval)
                continue
            if found is not None:
                yield TriggerEvent(found)
                # Store the position only once the triggerer has synced and persisted the event.
                await asyncio.sleep(self.commit_delay)
                position = found["to_snapshot_id"]
                watched = await asyncio.to_thread(advance_position, table, watched, position)
                self._watched = watched
                await self.save_position(uri, position)
            elif checked != position:
                if checked < position:
                    self.log.warning("%s was rolled back to snapshot %d, below position %d", uri, checked, position)
                position = checked
                watched = await asyncio.to_thread(advance_position, table, watched, position)
                self._watched = watched
                await self.save_position(uri, position)
            await asyncio.sleep(self.poke_interval)

    def _poll(self, table, position: int) -> tuple[dict[str, Any] | None, int]:
        """(the new range or None, the latest snapshot id seen)."""
        try:
            new = find_new_snapshots(
                table, after_snapshot_id=position, commit_kinds=self.commit_kinds, with_changes=self.with_changes
            )
            return (new.to_dict() if new.found else None), new.latest_snapshot_id
        except SnapshotNotFoundError:
            earliest = table.snapshot_manager.earliest_id()
            if earliest is None or earliest <= position:
                # A snapshot vanished while it was read (a rollback running): look again next poll.
                self.log.warning("Snapshots of %s changed while they were read; polling again", table.uri)
                return None, position
            # Report from the earliest snapshot on; the event says which snapshots went unreported.
            new = find_new_snapshots(table, after_snapshot_id=earliest, commit_kinds=self.commit_kinds, with_changes=self.with_changes)
            found = new.to_dict() if new.found else None
            if found is not None:
                found["expired_after_snapshot_id"] = position
            return found, new.latest_snapshot_id


# The short names the package was specified with: public names of the same classes, beside the prefixed
# ones. Triggers serialized under them (their classpath is stored with the deferred task) deserialize.
NewSnapshotTrigger = SnapTableNewSnapshotTrigger
SnapshotEventTrigger = SnapTableSnapshotEventTrigger
