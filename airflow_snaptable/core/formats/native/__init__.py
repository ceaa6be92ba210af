"""The native format's side of the store seam: what the engine reads of a native table beyond
the managers of core/native/ (``SnapshotManager``, ``TagManager``, ``ConsumerManager``).

- ``files.py``: ``NativeFiles``, the FileStore over manifests, manifest lists and data files;
- ``in_use.py``: the files a native table references, as 8-byte hashes, for orphan cleaning;
- ``verify.py``: what is wrong with a native table, reported, never raised.

May import what core/formats/ may.
"""
