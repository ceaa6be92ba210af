"""Deletion plans on storage: the compact, chunked encoding reads back exactly, and plans written
before it (every field, spaced JSON) still read."""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.core.lifecycle import deletion_plans as plans
from airflow_snaptable.core.errors import CorruptMetadataError
from airflow_snaptable.core.lifecycle.deletion_plans import DataCandidate, DeletionPlan


def _plan(candidates: list[DataCandidate], **extra) -> DeletionPlan:
    return DeletionPlan(
        kind=plans.EXPIRE, fence=7, snapshot_ids=[3, 4, 5, 6], data_files=candidates,
        manifest_files=[("manifest-a", 10), ("manifest-list-b", 20)], **extra,
    )


def test_round_trip_keeps_every_field_of_every_candidate():
    candidates = [
        DataCandidate("data/p=1/a.parquet", 1, below=4),
        DataCandidate('data/p="x"/b\\c.parquet', 2, below=5, from_id=6, readded=True),
        DataCandidate("data/p=é/ü.parquet", 0, below=6, readded=True),
        DataCandidate("data/p=2/d.parquet", 3, below=7, from_id=0),
    ]
    plan = _plan(candidates, tag_names=["t1"], tag_create_times={"t1": 5}, ceiling=9, planned_latest=[9, "x"])
    assert DeletionPlan.from_json(plan.to_json(), where="p") == plan


def test_round_trip_across_several_chunks(monkeypatch):
    monkeypatch.setattr(plans, "_JSON_CHUNK", 3)
    for count in (0, 1, 3, 4, 7):
        plan = _plan([DataCandidate(f"data/f-{i}", i, below=i + 1, readded=i % 2 == 0) for i in range(count)])
        data = plan.to_json()
        json.loads(data)  # valid JSON, whatever the chunking
        assert DeletionPlan.from_json(data, where="p") == plan


def test_fence_only_has_no_file_lists():
    plan = _plan([DataCandidate("data/a", 1, below=2)])
    pending = DeletionPlan.from_json(plan.to_json(fence_only=True), where="p")
    assert (pending.data_files, pending.manifest_files, pending.fence) == ([], [], 7)


def test_a_plan_in_the_earlier_encoding_reads():
    """Every candidate field written out, spaced JSON: what earlier versions wrote."""
    doc = {
        "kind": "expire", "fence": 3, "snapshot_ids": [1, 2],
        "data_files": [
            {"path": "data/a", "size": 5, "below": 2, "from_id": None, "readded": False},
            {"path": "data/b", "size": 6, "below": 3, "from_id": 1, "readded": True},
        ],
        "manifest_files": [["manifest-x", 9]], "tag_names": [], "ceiling": None, "restore_snapshot": None,
        "tag_create_times": {}, "planned_latest": None, "id": "abc",
    }
    plan = DeletionPlan.from_json(json.dumps(doc).encode(), where="p")
    assert plan.data_files == [DataCandidate("data/a", 5, 2), DataCandidate("data/b", 6, 3, 1, True)]
    assert plan.manifest_files == [("manifest-x", 9)] and plan.id == "abc"


def test_omitted_fields_are_only_the_defaults():
    data = _plan([DataCandidate("data/a", 1, below=2), DataCandidate("data/b", 1, below=2, from_id=0)]).to_json()
    written = json.loads(data)["data_files"]
    assert written == [{"path": "data/a", "size": 1, "below": 2}, {"path": "data/b", "size": 1, "below": 2, "from_id": 0}]


def test_a_broken_candidate_is_corruption():
    doc = json.loads(_plan([DataCandidate("data/a", 1, below=2)]).to_json())
    doc["data_files"][0]["unknown"] = 1
    with pytest.raises(CorruptMetadataError):
        DeletionPlan.from_json(json.dumps(doc).encode(), where="p")
