"""Recoverable deletes: deleting runs that keep what they remove noncurrent, undo, purge (docs/lifecycle.md).

- journal.py: the record a run writes before it unpublishes anything, and the undo/purge markers;
- record.py: how a deletion plan records its removals instead of deleting;
- undo.py: bringing a run's snapshots, tags and consumers back;
- purge.py: deleting the noncurrent files whose retention passed, checked against the live metadata;
- trash.py: what the journal holds, per run.

Imports the lifecycle engine below it (store, deletion plans); the plan executor imports record.py.
"""
