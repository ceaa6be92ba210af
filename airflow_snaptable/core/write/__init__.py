"""The write path of native tables: what ``Table.append``, ``overwrite``, ``delete``, ``compact`` and
``commit_files`` plan, before core/native/commit.py commits it.

- ``rows.py``: ``TableWrite``, rows checked, written as data files, committed as one snapshot;
- ``external_files.py``: data files written elsewhere (Spark tasks), checked, then committed:
  no path the table knows (or an unfinished deletion plan names) is committed again;
- ``compaction.py``: each partition's small files rewritten into fewer, bigger ones.

May import: ``core.errors``, ``core.arguments``, ``core.io``, ``core.native``, ``core.lifecycle``
(the deletion plans a commit must not undo). Never a store of ``core.formats``, ``Table`` or the actions.
"""
