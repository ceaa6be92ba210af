"""The native table format (docs/format.md): what is on storage and how it is written and read.

It is also the engine's vocabulary: ``Snapshot``, ``DataFile``, ``ManifestEntry``, ``TableSchema``,
``Tag`` and ``Consumer`` are what every store hands the lifecycle engine, whatever the format.

- the table's files: ``schema.py``, ``snapshot.py`` (snapshots and their manager),
  ``manifest.py`` (manifests and lists), ``tags.py`` and ``consumers.py`` (tag and consumer files),
  ``data_files.py`` and ``batch_writer.py`` (rows into Parquet data files);
- committing: ``commit.py`` (the optimistic commit), ``commit_request.py``, ``commit_conflicts.py``,
  ``commit_lineage.py``, ``deleting_commits.py``, ``manifest_merge.py``;
- reading: ``scan.py``, ``partition_pruning.py``, ``data_skipping.py``, ``filter_terms.py``, with the
  statistics they judge by (``column_stats.py``, ``column_bounds.py``, ``partition_bounds.py``);
  ``manifest_changes.py`` (a manifest read as kind, path and size only, for expiry planning);
  ``new_snapshots.py`` (what landed after a baseline, as sensors report it).

May import: ``core.errors``, ``core.arguments``, ``core.io``. Never the engine, a store or ``Table``.
"""
