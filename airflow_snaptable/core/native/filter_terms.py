"""The terms of a filter's top-level OR (``A | B | C`` -> ``[A, B, C]``), so data skipping judges each term on
its own columns (core/native/data_skipping.py): a file may hold a row ``A | B`` selects only if it may hold a row ``A``
or ``B`` selects, and a block of files neighbouring on ``A``'s column is tight there, where a block of a curve
over both columns is wide on each.

pyarrow has no public way to take an ``Expression`` apart. Its pickled form is an Arrow IPC file whose schema
metadata lists the expression's nodes in prefix order (``call: or_kleene`` ... ``end: or_kleene``, with
``field_ref`` and ``literal`` nodes, literals as the columns of one record batch); each argument's run of
nodes, with the same literal columns, is an expression of its own. Any surprise (another layout, names that do
not print plainly) leaves the filter whole, and an OR is taken apart only when OR-ing its two arguments gives
back an expression equal to it: taking a filter apart never changes what it means, at worst it is not done.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_METADATA = "\n-- schema metadata --\n"
_OR = "or_kleene"  # the function ``|`` builds


def or_terms(expression: pc.Expression) -> list[pc.Expression]:
    """The terms of ``expression``'s top-level OR (nested ORs flattened), or ``[expression]``."""
    try:
        return _split(expression)
    except Exception:  # noqa: BLE001 - an unexpected serialised form: the filter is judged whole, as before
        return [expression]


def _split(expression: pc.Expression) -> list[pc.Expression]:
    _rebuild, (buffer,) = expression.__reduce__()
    reader = pa.ipc.open_file(buffer)
    literals = reader.get_batch(0)
    text = reader.schema.to_string(show_field_metadata=False, show_schema_metadata=True, truncate_metadata=False)
    nodes = []
    for line in text.split(_METADATA, 1)[1].split("\n"):
        key, separator, value = line.partition(": ")
        if not separator or len(value) < 2 or value[0] != "'" or value[-1] != "'":
            return [expression]
        nodes.append((key, value[1:-1]))
    if nodes[0] != ("call", _OR) or nodes[-1] != ("end", _OR):
        return [expression]
    arguments = nodes[1:-1]
    depth = 0
    for i, (key, _value) in enumerate(arguments):
        depth += 1 if key == "call" else -1 if key == "end" else 0
        if depth == 0:
            first, second = _expression(arguments[: i + 1], literals), _expression(arguments[i + 1 :], literals)
            if not (first | second).equals(expression):  # the terms must give back the filter exactly
                return [expression]
            return _split(first) + _split(second)
    return [expression]


def _expression(nodes: list[tuple[str, str]], literals: pa.RecordBatch) -> pc.Expression:
    schema = literals.schema.with_metadata(pa.KeyValueMetadata([(k.encode(), v.encode()) for k, v in nodes]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.record_batch(literals.columns, schema=schema))
    return pc.Expression._deserialize(sink.getvalue())
