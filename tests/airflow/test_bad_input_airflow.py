"""Rendered templates become real booleans, strictly (issue 9 item 2).

Operators take ``force="{{ params.force }}"``: the rendered text is "True" or "False",
which the hook turns into a bool before core's strict action check. Any other text is
an error, never a guess.
"""

from __future__ import annotations

import pytest

from airflow_snaptable import operators as ops
from airflow_snaptable.core import actions as core_actions
from airflow_snaptable.core.actions import build_action
from airflow_snaptable.core.errors import InvalidArgumentError
from tests.airflow.test_operators import orders, root, run  # noqa: F401 - fixtures
from tests.core.test_lifecycle import tree


@pytest.mark.parametrize("text, value", [("True", True), ("False", False), ("true", True), (" FALSE ", False)])
def test_rendered_booleans_become_bools(text, value):
    """issue 9 item 2: what a template renders a bool to, in any case."""
    assert build_action(core_actions.Rollback, "/t", snapshot_id=1, force=text).force is value
    assert build_action("remove-orphan-files", "/t", dry_run=text).dry_run is value


@pytest.mark.parametrize("text", ["yes", "no", "1", "0", "on", "fals", "None!"])
def test_other_text_for_a_boolean_is_an_error(text):
    """issue 9 item 2: "no" or "0" were read as False and "yes"/"1" as True: guesses that decide a forced rollback."""
    with pytest.raises(InvalidArgumentError, match="force must be true or false"):
        build_action(core_actions.Rollback, "/t", snapshot_id=1, force=text)


def test_a_rendered_false_does_not_force_a_rollback(orders):  # noqa: F811 - the fixture
    """issue 9 item 2: ``force="{{ params.force }}"`` with force False renders "False", which must not force."""
    orders.create_tag("good", snapshot_id=4)
    orders.update_consumer("reader", 7)
    before = tree(orders.uri)
    operator = ops.SnapTableRollbackOperator(task_id="r", table="orders", tag="good", force="{{ params.force }}")
    with pytest.raises(InvalidArgumentError, match="consumers have read past"):
        run(operator, params={"force": False})
    assert tree(orders.uri) == before and orders.consumer("reader").next_snapshot == 7
