"""What callers give, read one way everywhere: strict argument types, names that become paths,
times, and the table options.

- ``checks.py``: flags, counts and ids of the right type (the string ``"false"`` is no flag);
- ``names.py``: tag, consumer and partition names that become file names;
- ``times.py``: times as the table keeps them (epoch milliseconds, UTC) and durations;
- ``table_options.py``: the table options (Paimon's keys), checked when a table is created.

May import: ``core.errors`` only. Everything in core may import this.
"""
