"""A policy document is read as YAML and JSON specify, and what cannot be read is one typed line (issue 34 items 14
and 16): a syntax error names its line and column, a merge key (``<<: *base``) is overridden by the mapping's own
keys, and a document nested too deeply is an InvalidPolicyError, never a RecursionError traceback."""

from __future__ import annotations

import pytest

from airflow_snaptable.cli import main
from airflow_snaptable.core.errors import InvalidPolicyError
from airflow_snaptable.core.lake import Policy

DEEP = 1000  # past Python's recursion limit for PyYAML's composer and json's decoder


def _maintain_with(tmp_path, name: str, text: str, capsys) -> str:
    """Run ``maintain`` with the policy file ``name``: its exit code must be 2, its error one line; the line."""
    policy = tmp_path / name
    policy.write_text(text)
    (tmp_path / "lake").mkdir(exist_ok=True)
    assert main(["maintain", str(tmp_path / "lake"), "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaptable: InvalidPolicyError: policy: ") and err.count("\n") == 1, err
    return err


def test_a_yaml_syntax_error_is_one_line_with_its_position(tmp_path, capsys):
    text = "defaults:\n  snapshot-expiry:\n    min-snapshots-to-keep: 2\n   max-snapshots: [\n"
    err = _maintain_with(tmp_path, "p.yaml", text, capsys)
    assert "is not valid YAML: " in err and "at line 4, column 4" in err


@pytest.mark.parametrize("name, text", [
    ("p.yaml", "defaults: " + "[" * DEEP + "]" * DEEP),
    ("p.yaml", "defaults:\n  snapshot-expiry:\n    min-snapshots-to-keep: " + "{a: " * DEEP + "1" + "}" * DEEP),
    ("p.json", '{"defaults": ' + "[" * DEEP + "]" * DEEP + "}"),
    ("p.json", '{"defaults": {"clean": {"policy": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}}}"),
], ids=["yaml-lists", "yaml-mappings", "json-lists", "json-objects"])
def test_a_deeply_nested_policy_is_one_typed_line(tmp_path, capsys, name, text):
    assert "is nested too deeply" in _maintain_with(tmp_path, name, text, capsys)


MERGED = """
defaults:
  snapshot-expiry: &expiry
    min-snapshots-to-keep: 2
    max-snapshot-age-hours: 0
namespaces:
  ops:
    snapshot-expiry:
      <<: *expiry
      min-snapshots-to-keep: 4
  sales:
    snapshot-expiry:
      min-snapshots-to-keep: 5
      <<: *expiry
"""


def test_a_merge_key_is_overridden_by_the_mapping_s_own_keys():
    policy = Policy.from_text(MERGED, yaml=True)
    # The mapping's own keys win wherever they stand (YAML's merge key), the merged ones fill the rest.
    assert policy.namespaces["ops"]["snapshot-expiry"] == {"min-snapshots-to-keep": 4, "max-snapshot-age-hours": 0}
    assert policy.namespaces["sales"]["snapshot-expiry"] == {"min-snapshots-to-keep": 5, "max-snapshot-age-hours": 0}


@pytest.mark.parametrize("text", [
    "defaults:\n  snapshot-expiry:\n    min-snapshots-to-keep: 2\n    min-snapshots-to-keep: 3\n",
    "base: &b {x: 1}\ndefaults:\n  snapshot-expiry:\n    <<: *b\n    min-snapshots-to-keep: 2\n    min-snapshots-to-keep: 3\n",
], ids=["plain", "beside-a-merge"])
def test_a_key_given_twice_in_one_mapping_is_still_refused(text):
    with pytest.raises(InvalidPolicyError, match="given twice"):
        Policy.from_text(text, yaml=True)
