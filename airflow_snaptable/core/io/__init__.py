"""Storage and I/O: the one storage interface every operation goes through, and what it stands on.

- ``storage.py``: ``Storage``, paths relative to the table root over fsspec, atomic
  create-if-absent, every operation counted by kind (and the hook tests crash through);
- ``object_stores.py``: S3, GCS and Azure Blob Storage: each one's create-if-absent (the commit point)
  and batch delete;
- ``local_files.py``: local writes readers never see half of, and durable renames;
- ``listing.py``: one directory's listing, local or on an object store;
- ``pool.py``: the process-wide I/O thread pool;
- ``storage_options.py``: fsspec storage options and catalog properties given as text;
- ``path_set.py``: a set of file paths at 8 bytes a path (the in-use set of orphan cleaning).

May import: ``core.errors``. Knows no table format: the format and the engine import this.
"""
