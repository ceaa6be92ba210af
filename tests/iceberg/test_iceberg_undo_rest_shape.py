"""What Iceberg undo sends its catalog, in the shape a REST catalog takes (issue 26).

No REST catalog server runs here: the commits go through pyiceberg's SQL catalog, with the
requirements a catalog that checks them on a server gets (``checks_requirements_here`` False: no
in-process ``AssertMetadataUnchanged``). Each commit is captured and must parse, losslessly, as
Iceberg's REST ``CommitTableRequest`` (pyiceberg's model of the REST spec): only standard updates and
requirements. Undoing an expiry needs a catalog that applies the commit in process (Iceberg's
add-snapshot refuses an old snapshot): through a REST-style catalog it is refused, changing nothing.
"""

from __future__ import annotations

import json

import pytest

from airflow_snaptable.core.errors import UndoRefusedError, UndoUnsupportedError, UnsupportedOperationError
from airflow_snaptable.core.formats.iceberg import requirements
from tests.iceberg.conftest import read_everything
from tests.iceberg.undo_support import expired_consumer, expired_history
from tests.iceberg.undo_support import history as _history
from tests.iceberg.undo_support import open_orders as _open


def _as_rest_requests(monkeypatch) -> list[dict]:
    """Commits from now on are made as for a REST catalog and recorded as the JSON request it would get."""
    from pyiceberg.catalog.sql import SqlCatalog

    sent: list[dict] = []
    commit = SqlCatalog.commit_table

    def recording(self, table, table_requirements, updates):
        sent.append({
            "identifier": {"namespace": list(table.name()[:-1]), "name": table.name()[-1]},
            "requirements": [json.loads(r.model_dump_json(by_alias=True, exclude_none=True)) for r in table_requirements],
            "updates": [json.loads(u.model_dump_json(by_alias=True, exclude_none=True)) for u in updates],
        })
        return commit(self, table, table_requirements, updates)

    monkeypatch.setattr(SqlCatalog, "commit_table", recording)
    monkeypatch.setattr(requirements, "checks_requirements_here", lambda catalog: False)
    return sent


def _parses_as_rest(request: dict) -> None:
    from pyiceberg.table import CommitTableRequest

    parsed = CommitTableRequest.model_validate(request)
    assert json.loads(parsed.model_dump_json(by_alias=True, exclude_none=True)) == request


REF_RUNS = {
    "delete-tag": lambda t, ids: t.delete_tag("t1"),
    "rollback": lambda t, ids: t.rollback_to(ids[2]),
}


@pytest.mark.parametrize("operation", sorted(REF_RUNS))
def test_undoing_a_ref_run_commits_only_what_a_rest_catalog_takes(iceberg_env, monkeypatch, operation):
    table, ids = _history(iceberg_env)
    before = read_everything(table)
    ours = _open(iceberg_env)
    with ours.retaining_noncurrent(10, operation) as run:
        REF_RUNS[operation](ours, ids)
    sent = _as_rest_requests(monkeypatch)
    _open(iceberg_env).undo(run.run_id)
    monkeypatch.undo()
    assert sent, "the undo made no catalog commit"
    for request in sent:
        _parses_as_rest(request)
        assert {r["type"] for r in request["requirements"]} <= {"assert-table-uuid", "assert-ref-snapshot-id"}
    assert read_everything(table) == before


def test_undoing_a_consumer_expiry_commits_only_what_a_rest_catalog_takes(iceberg_env, monkeypatch):
    expired = expired_consumer(iceberg_env)
    sent = _as_rest_requests(monkeypatch)
    _open(iceberg_env).undo(expired.run_id)
    monkeypatch.undo()
    assert sent
    for request in sent:
        _parses_as_rest(request)
    assert _open(iceberg_env).consumer("reader") == expired.position


def test_undoing_an_expiry_through_a_rest_style_catalog_is_refused_changing_nothing(iceberg_env, monkeypatch):
    run = expired_history(iceberg_env)
    table, before = run.table, run.before
    expired = read_everything(table)
    sent = _as_rest_requests(monkeypatch)
    with pytest.raises(UndoUnsupportedError, match="sequence number") as refused:
        _open(iceberg_env).undo(run.run_id)
    assert isinstance(refused.value, UndoRefusedError) and isinstance(refused.value, UnsupportedOperationError)
    monkeypatch.undo()
    assert sent == [] and read_everything(table) == expired
    journal = _open(iceberg_env).noncurrent_journal()
    assert journal.marked_runs("undo-") == set(), "a refused undo leaves no mark (deleting runs would back out)"
    # Through a catalog that applies the commit in process, the same run is undone.
    _open(iceberg_env).undo(run.run_id)
    assert read_everything(table) == before


def test_why_an_expiry_undo_needs_an_in_process_catalog(iceberg_env, monkeypatch):
    """Its commit carries the snapshots back in an update Iceberg's REST spec does not have."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pydantic import ValidationError

    run = expired_history(iceberg_env)
    table, before = run.table, run.before
    actions: list[str] = []
    commit = SqlCatalog.commit_table

    def recording(self, table, table_requirements, updates):
        actions.extend(u.action for u in updates)
        with pytest.raises(ValidationError):
            _parses_as_rest({
                "identifier": {"namespace": ["db"], "name": "orders"}, "requirements": [],
                "updates": [json.loads(u.model_dump_json(by_alias=True, exclude_none=True)) for u in updates],
            })
        return commit(self, table, table_requirements, updates)

    monkeypatch.setattr(SqlCatalog, "commit_table", recording)
    _open(iceberg_env).undo(run.run_id)
    assert "snaptable-restore-snapshots" in actions
    assert read_everything(table) == before
