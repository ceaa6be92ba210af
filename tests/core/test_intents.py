"""Intents (core/lifecycle/intents.py): tags and consumer positions being published are honoured by
deletion plans while their writer lives, and cost nothing once it is gone."""

from __future__ import annotations

import os
import time

from airflow_snaptable.core.native.consumers import Consumer
from airflow_snaptable.core.lifecycle.intents import CONSUMER, STALE_INTENT_SECONDS, TAG, Intent, IntentManager
from airflow_snaptable.core.native.tags import Tag
from tests.conftest import sorted_ids
from tests.core.test_lifecycle import FAR_FUTURE, check_clean, check_readable
from tests.core.test_lifecycle_crash import _linear_table as _linear

EXPIRE = dict(time_retained="0 s", now=FAR_FUTURE)


def _intent_files(uri: str) -> list[str]:
    directory = os.path.join(uri, "intent")
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_a_tag_being_published_keeps_its_files_through_an_expiry(tmp_path):
    """The writer announced the tag and passed its check, then paused; an expiry runs; the tag lands."""
    history = _linear(str(tmp_path / "t"))
    table = history.table
    tag = Tag("slow", table.snapshot(3), table.clock())
    intents = IntentManager(table.storage)
    intent = intents.announce(Intent(TAG, tag=tag))
    result = table.expire_snapshots(retain_min=1, **EXPIRE)
    assert 3 in result.expired_snapshot_ids and result.protected_data_files > 0
    assert table.tag_manager.create(tag)  # the paused writer publishes
    intents.withdraw(intent)
    assert sorted_ids(table.scan(tag="slow").to_arrow()) == history.model[3]
    check_clean(table.uri, history.model)


def test_a_consumer_position_being_published_bounds_expiry(tmp_path):
    history = _linear(str(tmp_path / "t"))
    table = history.table
    intents = IntentManager(table.storage)
    intent = intents.announce(Intent(CONSUMER, consumer=Consumer("slow", 4, table.clock())))
    result = table.expire_snapshots(retain_min=1, **EXPIRE)
    assert result.earliest_after == 3  # keeps 4 and its base 3, as for a published consumer
    table.consumer_manager.write(intent.consumer)
    intents.withdraw(intent)
    assert table.changes(3, 4).added_files or table.changes(3, 4).deleted_files
    check_readable(table.uri, history.model)


def test_abandoned_intents_neither_block_nor_fail_later_runs(tmp_path):
    """A tag intent whose files an expiry deleted and a consumer intent below EARLIEST were abandoned."""
    history = _linear(str(tmp_path / "t"))
    table = history.table
    intents = IntentManager(table.storage)
    tag_intent = Intent(TAG, tag=Tag("ghost", table.snapshot(2), table.clock()))
    consumer_intent = Intent(CONSUMER, consumer=Consumer("ghost", 2, table.clock()))
    table.expire_snapshots(retain_min=1, **EXPIRE)
    # Written as if by writers that crashed after a plan had read intents:
    intents.announce(tag_intent)
    intents.announce(consumer_intent)
    history.append(2)
    history.overwrite(2)
    result = table.expire_snapshots(retain_min=1, **EXPIRE)  # would fail closed on the ghost tag's manifests
    assert result.expired_snapshot_ids
    assert _intent_files(table.uri) == [os.path.basename(tag_intent.path)]  # the consumer intent below EARLIEST is dropped
    assert table.tags() == [] and table.consumers() == []  # readers never saw either
    check_clean(table.uri, history.model)


def test_stale_intents_are_dropped_and_recent_ones_kept(tmp_path):
    history = _linear(str(tmp_path / "t"))
    table = history.table
    intents = IntentManager(table.storage)
    old = intents.announce(Intent(TAG, tag=Tag("old", table.snapshot(7), table.clock())))
    recent = intents.announce(Intent(CONSUMER, consumer=Consumer("recent", 7, table.clock())))
    past = time.time() - STALE_INTENT_SECONDS - 60
    os.utime(os.path.join(table.uri, old.path), (past, past))
    dry = table.expire_snapshots(retain_min=1, dry_run=True, **EXPIRE)
    assert len(_intent_files(table.uri)) == 2  # a dry run changes nothing
    assert dry.earliest_after == 6  # the recent consumer intent at 7 keeps 6 and 7
    table.expire_snapshots(retain_min=1, **EXPIRE)
    assert _intent_files(table.uri) == [os.path.basename(recent.path)]
    assert table.earliest_snapshot().id == 6


def test_intent_round_trip_and_corrupt_intent_fails_closed(tmp_path):
    import pytest

    from airflow_snaptable.core.errors import CorruptMetadataError

    history = _linear(str(tmp_path / "t"))
    table = history.table
    intents = IntentManager(table.storage)
    tag_intent = intents.announce(Intent(TAG, tag=Tag("a", table.snapshot(5), 123, 456)))
    consumer_intent = intents.announce(Intent(CONSUMER, consumer=Consumer("c", 6, 789)))
    assert intents.tags() == [tag_intent.tag] and intents.consumers() == [consumer_intent.consumer]
    table.storage.write_bytes("intent/intent-broken.json", b'{"kind": "tag", "payload": {')
    before = sorted(os.listdir(os.path.join(table.uri, "snapshot")))
    with pytest.raises(CorruptMetadataError, match="intent"):
        table.expire_snapshots(retain_min=1, **EXPIRE)
    assert sorted(os.listdir(os.path.join(table.uri, "snapshot"))) == before  # nothing deleted


def test_tag_published_between_the_two_protection_listings_is_protected(tmp_path):
    """The tagger passed its check before the expiry began and publishes while the expiry reads what
    protects: whichever of intents and tags the expiry lists first, it must see the tag in one of them."""
    import threading

    history = _linear(str(tmp_path / "t"))
    uri = history.table.uri
    from airflow_snaptable.core import Table

    tagger = Table.open(uri)
    paused, release = threading.Event(), threading.Event()

    def tagger_hook(kind, path):
        if kind == "write" and path == "tag/tag-racer":
            paused.set()  # announced and checked; the tag file is next
            assert release.wait(30)

    tagger.storage.on_operation = tagger_hook
    thread = threading.Thread(target=lambda: tagger.create_tag("racer", 3))
    thread.start()
    assert paused.wait(30)

    expirer = Table.open(uri)
    state = {"pending": False, "rechecked": False, "first_listing": False, "released": False}

    def expiry_hook(kind, path):
        if state["released"]:
            return
        if state["first_listing"]:  # the op right after the first protection listing
            state["released"] = True
            release.set()
            thread.join(30)
            return
        if kind == "write" and path.startswith("plan/pending-"):
            state["pending"] = True
        elif state["pending"] and kind == "list" and path == "consumer":
            state["rechecked"] = True  # consumers re-checked; what protects is read next
        elif state["rechecked"] and kind == "list" and path in ("tag", "intent"):
            state["first_listing"] = True

    expirer.storage.on_operation = expiry_hook
    result = expirer.expire_snapshots(retain_min=1, **EXPIRE)
    assert state["released"] and not thread.is_alive()
    assert 3 in result.expired_snapshot_ids
    assert sorted_ids(Table.open(uri).scan(tag="racer").to_arrow()) == history.model[3]
    check_clean(uri, history.model)


def test_consumer_published_between_the_two_recheck_listings_bounds_the_expiry(tmp_path):
    """A new consumer announced and checked after the expiry planned its range but before its fence went
    up, then published while the expiry re-checks consumers: the expiry must see it and plan again."""
    import threading

    from airflow_snaptable.core import Table

    history = _linear(str(tmp_path / "t"))
    uri = history.table.uri
    reader = Table.open(uri)
    checked, release = threading.Event(), threading.Event()

    def reader_hook(kind, path):
        if kind == "write" and path == "consumer/consumer-late":
            checked.set()  # announced and checked; the consumer file is next
            assert release.wait(30)

    reader.storage.on_operation = reader_hook
    thread = threading.Thread(target=lambda: reader.update_consumer("late", 3))
    expirer = Table.open(uri)
    state = {"started": False, "pending": False, "released": False}

    def expiry_hook(kind, path):
        if state["released"]:
            return
        if kind == "write" and path.startswith("plan/pending-") and not state["started"]:
            state["started"] = True  # range planned without the consumer; it arrives now
            thread.start()
            assert checked.wait(30)
            return
        if state["started"] and kind == "write" and path.startswith("plan/pending-"):
            return
        if state["started"] and not state["pending"]:
            state["pending"] = True  # first op after the fence: the first re-check listing
            return
        if state["pending"]:  # the op after the first re-check listing: publish the consumer now
            state["released"] = True
            release.set()
            thread.join(30)

    expirer.storage.on_operation = expiry_hook
    result = expirer.expire_snapshots(retain_min=1, **EXPIRE)
    assert state["released"] and not thread.is_alive()
    assert Table.open(uri).consumer("late").next_snapshot == 3
    assert result.earliest_after <= 2, result  # 3 and its base 2 kept
    check_readable(uri, history.model)
