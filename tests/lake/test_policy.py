"""The policy document: sections, precedence key by key, and errors at load time (core/lake/policy.py)."""

from __future__ import annotations

import pytest

from airflow_snaptable.core.errors import InvalidArgumentError, InvalidPolicyError
from airflow_snaptable.core.lake import JOBS, Policy

#: The issue's example policy.
EXAMPLE = {
    "defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0},
                 "orphan-file-removal": {"enabled": False}},
    "namespaces": {"ops": {"snapshot-expiry": {"min-snapshots-to-keep": 4}}},
    "tables": {"sales.returns": {"snapshot-expiry": {"enabled": False}}},
}


def test_the_example_policy_resolves_key_by_key():
    policy = Policy.from_mapping(EXAMPLE)
    orders = policy.resolve("sales.orders")["snapshot-expiry"]
    assert orders.enabled and orders.settings == {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0}
    ops = policy.resolve("ops.metrics.daily")["snapshot-expiry"]
    assert ops.enabled and ops.settings == {"min-snapshots-to-keep": 4, "max-snapshot-age-hours": 0}
    assert ops.sources == {"min-snapshots-to-keep": "namespaces.ops", "max-snapshot-age-hours": "defaults"}
    returns = policy.resolve("sales.returns")["snapshot-expiry"]
    assert not returns.enabled and returns.disabled_reason == "disabled by the policy (tables.sales.returns)"
    orphans = policy.resolve("sales.orders")["orphan-file-removal"]
    assert not orphans.enabled and "defaults" in orphans.disabled_reason
    # Deleting is opt-in: a job no section names never runs.
    assert not policy.resolve("sales.orders")["clean"].enabled
    assert policy.resolve("sales.orders")["clean"].disabled_reason == "no policy section names this job"
    assert list(policy.resolve("x")) == list(JOBS)


def test_the_longest_matching_namespace_wins_and_a_namespace_covers_those_below_it():
    policy = Policy.from_mapping({
        "defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 1, "max-snapshots": 50, "max-snapshot-age-hours": 24}},
        "namespaces": {
            "a.b": {"snapshot-expiry": {"min-snapshots-to-keep": 3}},
            "a": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshots": 20}},
            "ab": {"snapshot-expiry": {"max-snapshots": 5}},
        },
        "tables": {"a.b.t": {"snapshot-expiry": {"max-snapshot-age-hours": 1}}},
    })
    assert policy.resolve("a.b.t")["snapshot-expiry"].settings == {"min-snapshots-to-keep": 3, "max-snapshots": 20, "max-snapshot-age-hours": 1}
    assert policy.resolve("a.b.c.u")["snapshot-expiry"].settings == {"min-snapshots-to-keep": 3, "max-snapshots": 20, "max-snapshot-age-hours": 24}
    assert policy.resolve("a.u")["snapshot-expiry"].settings == {"min-snapshots-to-keep": 2, "max-snapshots": 20, "max-snapshot-age-hours": 24}
    # "a" is a namespace prefix of "a.b", not of "ab": prefixes are whole dotted parts.
    assert policy.resolve("ab.u")["snapshot-expiry"].settings == {"min-snapshots-to-keep": 1, "max-snapshots": 5, "max-snapshot-age-hours": 24}
    # A namespace section does not apply to a table of that name: "a.b" is the table b of namespace a, not namespace a.b.
    assert policy.resolve("a.b")["snapshot-expiry"].settings["min-snapshots-to-keep"] == 2


def test_enabled_is_a_key_like_the_others_and_null_unsets_an_inherited_key():
    policy = Policy.from_mapping({
        "defaults": {"snapshot-expiry": {"max-snapshots": 10}, "tag-expiry": {}},
        "namespaces": {"cold": {"snapshot-expiry": {"enabled": False}, "tag-expiry": {"enabled": False}}},
        "tables": {
            "cold.kept": {"snapshot-expiry": {"min-snapshots-to-keep": 3}},  # configured, still off: cold said so
            "cold.back": {"snapshot-expiry": {"enabled": True}},
            "hot.unbounded": {"snapshot-expiry": {"max-snapshots": None}},
        },
    })
    assert not policy.resolve("cold.kept")["snapshot-expiry"].enabled
    assert not policy.resolve("cold.other")["tag-expiry"].enabled
    back = policy.resolve("cold.back")["snapshot-expiry"]
    assert back.enabled and back.settings == {"max-snapshots": 10}
    unbounded = policy.resolve("hot.unbounded")["snapshot-expiry"]
    assert unbounded.enabled and unbounded.settings == {}
    assert policy.resolve("hot.other")["tag-expiry"].enabled  # named with no keys: on, with the table's settings


def test_sections_naming_what_a_location_lacks_are_reported_not_errors():
    policy = Policy.from_mapping({**EXAMPLE, "namespaces": {"ops": {}, "gone": {}, "sales.eu": {}}, "tables": {"sales.returns": {}, "x.y": {}}})
    assert policy.unmatched(["sales.returns", "ops.metrics.daily"]) == {"tables": ["x.y"], "namespaces": ["gone", "sales.eu"]}
    assert policy.unmatched(["sales.eu.orders"])["namespaces"] == ["gone", "ops"]


def test_yaml_and_json_policies_are_the_same_policy(tmp_path):
    (tmp_path / "p.json").write_text(
        '{"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2, "max-snapshot-age-hours": 0},'
        ' "orphan-file-removal": {"enabled": false}}, "namespaces": {"ops": {"snapshot-expiry": {"min-snapshots-to-keep": 4}}},'
        ' "tables": {"sales.returns": {"snapshot-expiry": {"enabled": false}}}}'
    )
    (tmp_path / "p.yaml").write_text(
        "defaults:\n"
        "  snapshot-expiry: {min-snapshots-to-keep: 2, max-snapshot-age-hours: 0}\n"
        "  orphan-file-removal: {enabled: false}\n"
        "namespaces:\n"
        "  ops:\n"
        "    snapshot-expiry: {min-snapshots-to-keep: 4}\n"
        "tables:\n"
        "  sales.returns:\n"
        "    snapshot-expiry: {enabled: false}\n"
    )
    assert Policy.load(tmp_path / "p.json") == Policy.load(tmp_path / "p.yaml") == Policy.from_mapping(EXAMPLE)


@pytest.mark.parametrize(
    "doc, names",
    [
        ({"default": {}}, ["unknown section", "default"]),
        ({"defaults": {"snapshot-expire": {}}}, ["unknown job", "snapshot-expire"]),
        ({"defaults": {"snapshot-expiry": {"min-snapshot-to-keep": 1}}}, ["unknown key", "min-snapshot-to-keep", "defaults.snapshot-expiry"]),
        ({"tables": {"a.b": {"clean": {"retain": 1}}}}, ["tables.a.b.clean", "unknown key", "retain"]),
        ({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": "5"}}}, ["defaults.snapshot-expiry.min-snapshots-to-keep", "integer", "'5'"]),
        ({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": True}}}, ["min-snapshots-to-keep", "integer"]),
        ({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 2.5}}}, ["min-snapshots-to-keep", "integer"]),
        ({"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 0}}}, ["min-snapshots-to-keep", ">= 1"]),
        ({"defaults": {"snapshot-expiry": {"max-snapshot-age-hours": -1}}}, ["max-snapshot-age-hours", ">= 0"]),
        ({"defaults": {"snapshot-expiry": {"max-snapshot-age-hours": float("nan")}}}, ["max-snapshot-age-hours"]),
        ({"namespaces": {"ops": {"snapshot-expiry": {"enabled": "false"}}}}, ["namespaces.ops.snapshot-expiry.enabled", "true or false"]),
        ({"defaults": {"orphan-file-removal": {"older-than-days": 0}}}, ["older-than-days", "> 0"]),
        ({"defaults": {"periodic-tags": {"period": "weekly"}}}, ["period", "daily, hourly, two-hours", "weekly"]),
        ({"defaults": {"periodic-tags": {"formatter": "dashes"}}}, ["formatter"]),
        ({"defaults": {"periodic-tags": {"delay": "soon"}}}, ["delay", "soon"]),
        ({"defaults": {"periodic-tags": {"period": "hourly", "delay": "2 h"}}}, ["defaults.periodic-tags", "delay", "shorter than the period"]),
        ({"defaults": {"data-compaction": {"target-file-size": "big"}}}, ["target-file-size"]),
        ({"defaults": {"data-compaction": {"min-file-num": 1}}}, ["min-file-num", ">= 2"]),
        ({"defaults": {"clean": {"policy": "KEEP_ALL"}}}, ["clean.policy", "KEEP_LATEST_COMMITS"]),
        ({"defaults": {"clean": {"commits-retained": 3}}}, ["defaults.clean", "needs policy"]),
        ({"defaults": {"clean": {"policy": "KEEP_LATEST_BY_HOURS"}}}, ["KEEP_LATEST_BY_HOURS", "needs hours-retained"]),
        (
            {"defaults": {"clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 5}},
             "tables": {"a.b": {"clean": {"policy": "KEEP_LATEST_FILE_VERSIONS", "file-versions-retained": 2}}}},
            ["tables.a.b.clean", "KEEP_LATEST_FILE_VERSIONS", "not commits-retained"],
        ),
        (
            {"defaults": {"snapshot-expiry": {"min-snapshots-to-keep": 5}},
             "namespaces": {"a": {"snapshot-expiry": {"max-snapshots": 3}}}},
            ["namespaces.a.snapshot-expiry", "max-snapshots (3)", "min-snapshots-to-keep (5)"],
        ),
        ({"tables": {"a..b": {}}}, ["'a..b'", "dotted name"]),
        ({"namespaces": {"ops": []}}, ["namespaces.ops", "object of jobs"]),
        ({"defaults": {"tag-expiry": None}}, ["defaults.tag-expiry", "object of settings"]),
        ([], ["must be an object"]),
    ],
)
def test_a_bad_policy_fails_at_load_naming_what_is_wrong(doc, names):
    with pytest.raises(InvalidPolicyError) as caught:
        Policy.from_mapping(doc)
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))
    assert isinstance(caught.value, InvalidArgumentError)  # the CLI's typed-error exit, status 2


def test_a_clean_policy_switch_is_made_with_null(tmp_path):
    policy = Policy.from_mapping({
        "defaults": {"clean": {"policy": "KEEP_LATEST_COMMITS", "commits-retained": 5}},
        "tables": {"a.b": {"clean": {"policy": "KEEP_LATEST_FILE_VERSIONS", "file-versions-retained": 2, "commits-retained": None}}},
    })
    assert policy.resolve("a.b")["clean"].settings == {"policy": "KEEP_LATEST_FILE_VERSIONS", "file-versions-retained": 2}


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("p.json", '{"defaults": {}, "defaults": {}}', "given twice"),
        ("p.yaml", "defaults:\n  tag-expiry: {}\n  tag-expiry: {enabled: false}\n", "given twice"),
        ("p.json", '{"defaults": ', "not valid JSON"),
        ("p.yaml", "defaults: [", "not valid YAML"),
        ("p.yaml", "defaults:\n  snapshot-expiry:\n    enabled: maybe\n", "true or false"),
    ],
)
def test_bad_policy_files(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(InvalidPolicyError, match=message):
        Policy.load(tmp_path / name)
    with pytest.raises(InvalidPolicyError, match="cannot read"):
        Policy.load(tmp_path / "missing.json")
