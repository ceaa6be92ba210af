"""Taking a filter's top-level OR apart (core/native/filter_terms.py): the terms OR back to the very filter, and any
filter that is not an OR (or a form not recognised) stays whole. Data skipping's results on OR filters are
checked against in-memory filtering by the hypothesis tests of tests/core/test_column_stats.py."""

from __future__ import annotations

import functools
import operator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_snaptable.core.native.filter_terms import or_terms

f = pc.field


@pytest.mark.parametrize(
    "terms",
    [
        [(f("id") >= 5) & (f("id") < 10), f("r") == "x"],
        [f("a").is_null(), f("b").is_valid(), ~(f("c") == "it's")],
        [f("a") > 1, f("b").isin(pa.array([1, 2])), f("s") == "two\nlines"],
        [f("we'ird: name") == 1, f("b") > 2.5],
        [pc.scalar(True), f("a") > 1],
    ],
)
def test_an_or_is_taken_apart_into_its_terms(terms):
    expression = functools.reduce(operator.or_, terms)
    found = or_terms(expression)
    assert len(found) == len(terms) and all(a.equals(b) for a, b in zip(found, terms))


def test_nested_ors_are_flattened_whatever_their_shape():
    a, b, c = f("a") > 1, f("b") > 1, f("c") > 1
    assert [str(t) for t in or_terms(a | (b | c))] == [str(a), str(b), str(c)]
    assert [str(t) for t in or_terms((a | b) | c)] == [str(a), str(b), str(c)]


@pytest.mark.parametrize("expression", [f("a") > 1, ((f("a") > 1) | (f("b") > 2)) & (f("c") > 3), ~((f("a") > 1) | (f("b") > 2)), f("a").is_null()])
def test_what_is_not_an_or_stays_whole(expression):
    found = or_terms(expression)
    assert len(found) == 1 and found[0].equals(expression)
