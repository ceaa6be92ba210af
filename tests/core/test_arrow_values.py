"""Arrow values built from buffers (core/native/arrow_values.py) are pyarrow's own conversions, value for value."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_snaptable.core.native import arrow_values

CASES = [
    ([1, None, -3], pa.int8()), ([0, 2**63 - 1, -(2**63)], pa.int64()), ([1, 2**64 - 1], pa.uint64()), ([7], pa.uint16()),
    ([1.5, None, -0.0], pa.float32()), ([1e300, None], pa.float64()), ([True, None, False] * 3, pa.bool_()),
    (["a", None, "é", ""], pa.string()), (["a", None], pa.large_string()), ([b"x", None, b""], pa.binary()),
    ([dt.date(2020, 1, 2), None, dt.date(1969, 12, 31)], pa.date32()), ([dt.date(2020, 1, 2)], pa.date64()),
    ([dt.datetime(2020, 1, 2, 3, 4, 5, 6), None], pa.timestamp("us")), ([dt.datetime(1960, 1, 2, 3, 4, 5, 6)], pa.timestamp("ns")),
    ([dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))], pa.timestamp("s", "UTC")),
    ([dt.time(1, 2, 3)], pa.time32("ms")), ([dt.time(1, 2, 3, 4)], pa.time64("ns")), ([None, None], pa.null()), ([], pa.int32()),
]


@pytest.mark.parametrize("values,t", CASES, ids=[str(t) for _v, t in CASES])
def test_an_array_from_buffers_equals_pyarrows(values, t):
    built = arrow_values.array(values, t)
    built.validate(full=True)
    assert built.equals(pa.array(values, t))


@pytest.mark.parametrize("value", [1, -5, 1.5, "x", b"x", True, dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 1), dt.time(1, 2), None])
def test_a_literal_has_the_type_pa_scalar_infers(value):
    assert arrow_values.literal(value).equals(pa.scalar(value))


@pytest.mark.parametrize("values,t", [([1.5], pa.int64()), (["1"], pa.int64()), ([1], pa.string()), ([1], pa.bool_()), ([dt.datetime(2020, 1, 1)], pa.date32()), ([dt.datetime(2020, 1, 1)], pa.timestamp("s", "UTC"))])
def test_a_value_of_another_type_is_refused_not_converted(values, t):
    with pytest.raises(TypeError):
        arrow_values.array(values, t)


def test_a_value_pyarrow_would_not_build_here_is_left_to_pyarrow():
    assert arrow_values.literal(2**70) == 2**70
    assert arrow_values.literal_array([1, "a"]) == [1, "a"]
