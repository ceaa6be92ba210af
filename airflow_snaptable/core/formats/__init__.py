"""The table formats, side by side: each one's store behind the engine's seam
(core/lifecycle/store.py), and how a table URI picks one.

- ``native/``: this package's own format (its files are core/native/'s): the FileStore over its
  manifests (``files.py``), its in-use set for orphan cleaning (``in_use.py``) and ``verify``;
- ``paimon/``: an Apache Paimon table's snapshots, manifests, tags and consumers, read and
  changed as Paimon does;
- ``iceberg/``: an Apache Iceberg table in a pyiceberg catalog, with Iceberg's own lifecycle;
- ``foreign.py``: which format a URI or a table root names, and opening another engine's table.

May import: ``core.errors``, ``core.arguments``, ``core.io``, ``core.native``, ``core.lifecycle``
(the seam, and the rules a store runs on its own view, e.g. periodic tags on Iceberg refs).
Never the write path, ``Table`` or the actions; the engine never imports a store.
"""
