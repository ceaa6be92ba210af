"""Benchmarks: airflow_snaptable against deltalake and pyiceberg, in the same run.

Run with ``scripts/bench`` (``python -m benchmarks``); ``--help`` lists the options.

Modules:

- :mod:`benchmarks.common`   data generation, timing statistics, text tables, JSON.
- :mod:`benchmarks.systems`  one small handle per system (ours, deltalake, pyiceberg):
  create a table, append, overwrite, read back. Workloads share these.
- :mod:`benchmarks.w1_commits`  W1: many small appends, then one full overwrite.

A workload module exposes ``NAME``, ``DESCRIPTION``, ``run(ctx) -> dict`` (all
figures, JSON-serialisable) and ``render(result) -> str`` (the text report);
:mod:`benchmarks.__main__` lists the workloads in ``WORKLOADS``.
"""
