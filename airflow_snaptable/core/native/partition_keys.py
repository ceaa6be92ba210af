"""A partition's values as a key: what groups files by partition, on every format.

Files are in one partition when their partition values are equal as typed values, never when they
print alike: NULL, the string ``'null'`` and the string ``'None'`` are three partitions, the integer
1 and the string ``'1'`` two; dates, timestamps, decimals and binary values compare by value.
A float compares by its bits (``-0.0`` and ``0.0`` are two partitions, every NaN one), as Iceberg's
and Paimon's float comparators order them.
"""

from __future__ import annotations

from typing import Any, Iterable


def partition_key(values: Iterable[Any]) -> tuple:
    """The key of a partition whose values are ``values``, in order. Keys of one table sort (each value's
    type name comes before the value, so values of different types, None among them, are never compared)."""
    return tuple(_value_key(value) for value in values)


def _value_key(value: Any) -> tuple:
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)
