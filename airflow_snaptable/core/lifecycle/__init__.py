"""The lifecycle engine: the rules of a table's history, written once for every format.

It reaches a table only through the store seam, ``store.py`` (``TableStore``: snapshots, files,
tags, consumers, and a place for the engine's own files); each format implements it in
``core/formats/``. The rules are never copied per format.

- expiry (``expiry/``): which snapshots expire and which files that frees (``expiry/plan.py``),
  carried out in sub-ranges (``expiry/subranges.py``) or in parts (``expiry/parts.py``) by
  ``expiry/run.py``;
- what a deletion may not delete (``protection.py``), with ``path_hashes.py`` (tags' paths as
  8-byte hashes) and ``readds.py`` (files with several live intervals);
- the crash-safe deletions: ``deletion_plans.py`` (plans on storage, their fences),
  ``plan_executor.py`` (the one sequence every deletion runs), ``intents.py`` (tags and consumer
  positions announced before they are checked), ``progress.py`` (progress of long deletions);
- tags (``tags.py``: create, replace, delete, expire), periodic tags (``periodic_tags.py``),
  consumers (``consumers.py``: move, expire), ``rollback.py``, orphan cleaning (``orphans.py``),
  Hudi's cleaning policies and savepoints (``hudi_clean.py``), change sets and streams
  (``changes.py``).

May import: ``core.errors``, ``core.arguments``, ``core.io``, ``core.native`` (the engine's
vocabulary). Never a store of ``core.formats``, the write path, ``Table`` or the actions.
"""
