"""The one storage interface every table operation goes through.

A thin layer over fsspec that (1) works in paths relative to the table root,
(2) gives the atomic create-if-absent that commits rely on, and (3) counts
every operation by kind so benchmarks can compare the work done with the lower
bound. Tests inject crashes through :attr:`Storage.on_operation`.
"""

from __future__ import annotations

import functools
import os
import posixpath
import threading
import time
from collections import Counter
from typing import Any, Callable, Iterator, Mapping, Sequence

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

import airflow_snaptable.core.io.local_files as local_files
from airflow_snaptable.core.io.listing import list_directory
from airflow_snaptable.core.errors import (
    CorruptMetadataError,
    InvalidArgumentError,
    StorageError,
    UnsupportedStorageError,
)
from airflow_snaptable.core.io.object_stores import S3, ObjectStore, object_store_of
from airflow_snaptable.core.io.pool import UNLINK_THREADS, map_io
from airflow_snaptable.core.io.table_paths import check_deletable

#: The kinds of operation that are counted.
OPERATION_KINDS = ("read", "write", "list", "delete", "exists")

#: Files announced, then deleted concurrently, per batch on stores without a batch API. Each batch ends
#: by waiting for its slowest thread: W1's 2,000 data files go in one batch rather than two.
LOCAL_DELETE_BATCH = 4096
#: Keys per S3 DeleteObjects request (the API's maximum).
S3_DELETE_BATCH = S3.delete_batch


class Storage:
    """Relative-path file operations under one table root, counted by kind.

    :param fs: the fsspec filesystem.
    :param root: the table root in ``fs``'s own path form (no protocol, no trailing slash).
    :param uri: the table root as the user gave it, for messages.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, uri: str | None = None):
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.uri = uri or root
        self.counts: Counter[str] = Counter({kind: 0 for kind in OPERATION_KINDS})
        self._counts_lock = threading.Lock()
        #: Called as ``on_operation(kind, relative_path)`` before every operation;
        #: tests set it to raise at the N-th operation to simulate a crash there.
        self.on_operation: Callable[[str, str], None] | None = None
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        self._is_local = isinstance(fs, LocalFileSystem)
        self._is_memory = isinstance(fs, MemoryFileSystem)
        #: S3, GCS or Azure: commits are conditional creates there, deletes go in the store's batches.
        self.object_store: ObjectStore | None = object_store_of(tuple(protocols))
        self._is_s3 = self.object_store is S3

    @classmethod
    def from_uri(cls, uri: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> "Storage":
        """The storage of the table at ``uri`` (a local path or an fsspec URL).

        The location is checked first: an empty or blank one would be the current directory,
        ``None`` would become ``./None``, and a file cannot hold a table.
        """
        uri = check_location(uri)
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise InvalidArgumentError(f"storage options must be a mapping (a JSON object), got {type(storage_options).__name__}")
        options = dict(storage_options or {})
        protocol = fsspec.core.split_protocol(uri)[0] or "file"
        for part in protocol.split("::"):  # a chained URL ("simplecache::s3://...") names several
            try:
                fsspec.get_filesystem_class(part)
            except ValueError:
                raise InvalidArgumentError(f"table location {uri!r}: unknown storage protocol {part!r}") from None
            except ImportError as exc:
                store = object_store_of((part,))
                hint = f"; pip install 'airflow-snaptable[{store.extra}]'" if store is not None else ""
                raise UnsupportedStorageError(f"table location {uri!r}: storage protocol {part!r} needs a package: {exc}{hint}") from None
        if object_store_of((protocol,)) is not None:
            # A stale listing cache would hide new snapshots from readers (s3fs, gcsfs and adlfs all cache).
            options.setdefault("use_listings_cache", False)
        try:
            fs, root = fsspec.core.url_to_fs(uri, **options)
        except TypeError as exc:  # an option the filesystem does not take (values are not echoed: secrets)
            raise InvalidArgumentError(f"storage options {sorted(options)} for {protocol!r}: {exc}") from None
        if isinstance(fs, LocalFileSystem) and os.path.exists(root) and not os.path.isdir(root):
            raise InvalidArgumentError(f"table location {uri!r} is a file, not a directory")
        return cls(fs, root, uri=uri.rstrip("/"))

    # -- bookkeeping -------------------------------------------------------

    @property
    def is_remote(self) -> bool:
        """Every operation is a network round trip: worth overlapping reads on threads.

        Locally, reads come from the page cache and decoding holds the GIL, so
        threads only add switching (measured: planning an expiry 274 -> 403 ms).
        """
        return not (self._is_local or self._is_memory)

    @property
    def is_s3(self) -> bool:
        """The table is on S3 (or an S3-compatible server)."""
        return self._is_s3

    @property
    def has_conditional_create(self) -> bool:
        """Creates are conditional requests to an object store here (S3, GCS, Azure), which a server or
        emulator may ignore: probed when a table is created (core/native/schema.py)."""
        return self.object_store is not None

    def reset_counts(self) -> None:
        for kind in OPERATION_KINDS:
            self.counts[kind] = 0

    def snapshot_counts(self) -> dict[str, int]:
        return {kind: self.counts[kind] for kind in OPERATION_KINDS}

    def _op(self, kind: str, rel: str, n: int = 1) -> None:
        with self._counts_lock:  # data files are written from several threads
            self.counts[kind] += n
        if self.on_operation is not None:
            self.on_operation(kind, rel)

    def full_path(self, rel: str) -> str:
        return posixpath.join(self.root, rel) if rel else self.root

    def full_uri(self, rel: str) -> str:
        """The path of ``rel`` as a URL other tools (Spark, pyarrow) can open."""
        return posixpath.join(self.uri, rel) if rel else self.uri

    # -- operations --------------------------------------------------------

    def read_bytes(self, rel: str) -> bytes:
        """Read a whole file. A missing file raises FileNotFoundError; a directory CorruptMetadataError."""
        self._op("read", rel)
        try:
            if self._is_local:
                # Straight from the OS: fsspec's open path costs more than a small file's read.
                with open(self.full_path(rel), "rb") as f:
                    return f.read()
            return self.fs.cat_file(self.full_path(rel))
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise self._not_a_file(rel, exc) from None

    def read_many(self, rels: list[str]) -> dict[str, bytes]:
        """Read many whole files whose order does not matter; missing files are absent from the result.

        This is the bulk-read seam (manifests during expiry planning and orphan
        cleaning): remote stores read on the shared I/O pool, local files in turn
        (see :attr:`is_remote`); the Spark job overrides it to read on executors.
        """
        def read(rel: str) -> bytes | None:
            try:
                return self.read_bytes(rel)
            except FileNotFoundError:
                return None

        contents = map_io(read, rels) if self.is_remote else [read(rel) for rel in rels]
        return {rel: data for rel, data in zip(rels, contents) if data is not None}

    def open_read(self, rel: str):
        """Open a file for streaming reads (one counted read)."""
        self._op("read", rel)
        try:
            return self.fs.open(self.full_path(rel), "rb")
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise self._not_a_file(rel, exc) from None

    def _not_a_file(self, rel: str, exc: OSError) -> CorruptMetadataError:
        """What the table expects as a file is a directory, or one of its parents is a file."""
        where = "is a directory" if isinstance(exc, IsADirectoryError) else "has a parent that is not a directory"
        return CorruptMetadataError(f"{self.full_uri(rel)} {where}, where the table keeps a file")

    def write_bytes(self, rel: str, data: bytes, durable: bool = True) -> None:
        """Write (or replace) a file so that readers see the old or the new bytes, never a part.

        ``durable=False`` skips the fsync, for files that are only hints.
        """
        self._op("write", rel)
        path = self.full_path(rel)
        if self._is_local:
            local_files.write_replace(path, data, durable)
        else:
            self.fs.pipe_file(path, data)

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Atomically create ``rel`` with ``data`` if it does not exist.

        Returns False, writing nothing, when the file exists already. This is
        the commit point of every snapshot, so it must be atomic on storage:
        local files use temp file + fsync + hard link, object stores a conditional create
        (core/io/object_stores.py: S3 If-None-Match, GCS ifGenerationMatch=0, Azure If-None-Match).
        """
        self._op("write", rel)
        path = self.full_path(rel)
        if self._is_local:
            return local_files.create_exclusive(path, data)
        if self.object_store is not None:
            return self.object_store.create_exclusive(self.fs, path, data)
        if self._is_memory:
            # One process only; the check and the write happen under the GIL without I/O between them.
            if self.fs.exists(path):
                return False
            self.fs.pipe_file(path, data)
            return True
        raise UnsupportedStorageError(
            f"storage {self.fs.protocol!r} has no atomic create-if-absent that airflow_snaptable "
            "supports (local files, S3, GCS, Azure Blob Storage, memory)"
        )

    def exists(self, rel: str) -> bool:
        self._op("exists", rel)
        return self.fs.exists(self.full_path(rel))

    def list_names(self, rel_dir: str) -> list[str]:
        """Base names of the entries directly under ``rel_dir`` (empty if it does not exist)."""
        self._op("list", rel_dir)
        path = self.full_path(rel_dir)
        try:
            entries = self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise CorruptMetadataError(f"{self.full_uri(rel_dir)}: a parent is not a directory") from None
        own = path.rstrip("/")
        if self._is_local and entries == [own] and not os.path.isdir(own):
            # Listing a file lists the file: "no tags" or "no consumers" would be a wrong answer.
            raise CorruptMetadataError(f"{self.full_uri(rel_dir)} is not a directory, where the table keeps a directory")
        # Some S3 servers (SeaweedFS) list an emptied directory as itself.
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries if str(e).rstrip("/") != own)

    def list_files(self, rel_dir: str) -> list[tuple[str, int, float | None]]:
        """Every file under ``rel_dir`` recursively, sorted: (relative path, size, modified epoch seconds).

        For the small directories (plans, intents, consumers); a tree the size of the table is
        walked with :meth:`iter_files`, which never holds its listing.
        """
        return sorted(self.iter_files(rel_dir))

    def iter_files(self, rel_dir: str) -> Iterator[tuple[str, int, float | None]]:
        """Every file under ``rel_dir`` recursively, as (relative path, size, modified epoch seconds),
        listed one directory at a time: memory holds one directory's entries and the directories
        still to visit, never the tree's listing (orphan cleaning and ``verify`` of a table of
        millions of files).

        Order: a directory's files by name, then its subdirectories by name, depth first. Directories
        are not yielded; a directory that does not exist (or vanishes while the walk reaches it: an
        expiry removing an emptied partition) lists as empty; ``rel_dir`` naming a file yields that
        file. Every directory listed is one counted ``list`` operation.
        """
        pending = [rel_dir]
        while pending:
            files, directories = self.list_directory(pending.pop())
            yield from files
            pending.extend(sorted(directories, reverse=True))  # popped in name order

    def list_directory(self, rel_dir: str, *, follow_links: bool = False) -> tuple[list[tuple[str, int, float | None]], list[str]]:
        """The files (relative path, size, modified epoch seconds; sorted) and the subdirectories (relative
        paths) directly under ``rel_dir``, both empty if it does not exist: one counted ``list``. A link to a
        directory is no subdirectory unless ``follow_links`` (core/io/listing.py)."""
        self._op("list", rel_dir)
        return list_directory(self.fs, self.root, self.full_path(rel_dir), local=self._is_local, follow_links=follow_links)

    def remove_abandoned_temps(self, rel_dir: str) -> None:
        """Delete the temp files killed writers left in ``rel_dir`` (local_files.is_abandoned_temp: never a live one's).
        Only local writes make temp files (an object store takes a whole object): elsewhere nothing is listed."""
        now = time.time()  # compared with the storage's modification times, not a table's clock
        listed = self.list_files(rel_dir) if self._is_local else []
        self.delete_files([rel for rel, _size, mtime in listed if local_files.is_abandoned_temp(posixpath.basename(rel), mtime, now)])

    def delete(self, rel: str) -> None:
        """Delete a file; deleting a missing file is success (it is already gone)."""
        check_deletable([rel], self.uri)
        self._op("delete", rel)
        if self._is_local:
            local_files.unlink_quietly(self.full_path(rel))
            return
        try:
            self.fs.rm_file(self.full_path(rel))
        except FileNotFoundError:
            pass

    def sync_directory(self, rel_dir: str) -> None:
        """Make the removals and renames done in ``rel_dir`` durable before a next step relies on them (a
        local directory's fsync; object stores apply each request durably): deleted tags, unpublished snapshots."""
        if self._is_local:
            local_files.fsync_dir(self.full_path(rel_dir))

    def move_aside(self, rel: str, aside: str) -> bool:
        """Rename ``rel`` to ``aside`` for a bulk delete later (a missing ``rel`` is success; counted as a delete
        of ``rel``). Local disks only, where a rename costs 15 us to an unlink's 100: elsewhere it returns False,
        doing nothing, and the caller deletes ``rel``."""
        if not self._is_local:
            return False
        check_deletable([rel, aside], self.uri)
        self._op("delete", rel)
        try:
            os.replace(self.full_path(rel), self.full_path(aside))
        except FileNotFoundError:
            pass
        return True

    def remove_empty_dirs(self, rels: Sequence[str], stop_at: str) -> int:
        """Remove the directories of ``rels`` (and their parents, up to ``stop_at``, which stays) that are
        empty now; returns how many went. Only local filesystems have directories to remove (object stores
        have prefixes). Removal is ``rmdir``, which fails on a directory holding anything, and a writer
        that finds its directory removed between creating it and opening its file creates it again
        (core/io/local_files.py): never a lost write."""
        if not self._is_local:
            return 0
        removed = 0
        candidates = {posixpath.dirname(rel) for rel in rels}
        while candidates:
            rel_dir = max(candidates, key=lambda d: d.count("/"))  # deepest first: children before parents
            candidates.discard(rel_dir)
            if not rel_dir or rel_dir == stop_at or not rel_dir.startswith(stop_at.rstrip("/") + "/"):
                continue
            try:
                os.rmdir(self.full_path(rel_dir))
            except OSError:
                continue  # not empty (or gone already): keep it and its parents
            removed += 1
            candidates.add(posixpath.dirname(rel_dir))
        return removed

    def delete_files(self, rels: list[str]) -> None:
        """Delete many files whose relative order does not matter; all are gone on return.

        This is the bulk-delete seam: the Spark job overrides it to spread the
        deletes over executors. Object stores delete in their batch API (S3
        DeleteObjects, 1,000 keys a request; GCS batch, 100; Azure blob batch,
        256); other stores delete a batch on the shared I/O pool.
        Every file of a batch is announced (counted, ``on_operation``) before
        any of it is deleted, so an injected crash leaves a prefix of whole
        batches deleted. Missing files are success.
        """
        check_deletable(rels, self.uri)  # all of them before the first delete
        store = self.object_store
        batch_size = store.delete_batch if store is not None else LOCAL_DELETE_BATCH
        for start in range(0, len(rels), batch_size):
            batch = rels[start:start + batch_size]
            for rel in batch:
                self._op("delete", rel)
            paths = [self.full_path(rel) for rel in batch]
            if store is not None:
                store.delete_batch_paths(self.fs, paths)
            elif self._is_local:
                # os.unlink in one chunk per pool thread: a future and fsspec's path handling per file
                # cost more than the unlink itself (measured: 3,000 unlinks 420 ms per file, 210 ms chunked).
                per_chunk = -(-len(paths) // UNLINK_THREADS)
                map_io(local_files.unlink_all_quietly, [paths[i:i + per_chunk] for i in range(0, len(paths), per_chunk)], threads=UNLINK_THREADS)
            else:
                map_io(self._remove_quietly, paths)

    def _remove_quietly(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass


#: Schemes that only ever name URIs (``iceberg://``: a catalog's table), besides fsspec's protocols.
_URI_ONLY_SCHEMES = ("iceberg",)


#: The object stores' clients' own errors (no OSError, so they ended in a traceback): their modules, and the class
#: names that say the store cannot be reached, or that there are no usable credentials. (Not imported: core runs
#: without them.) An OSError (aiohttp's, a file's) is left as it is: callers and the CLI handle those already.
_CLIENT_MODULES = ("botocore", "azure.core", "google.auth")
_UNREACHABLE = {"ConnectionError", "HTTPClientError", "ServiceRequestError"}
_NO_CREDENTIALS = {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError", "NoAuthTokenError",
                   "ClientAuthenticationError", "DefaultCredentialsError", "RefreshError"}


def unreachable_storage_error(uri: str, exc: BaseException) -> StorageError | None:
    """The typed error for an object store client's own error (botocore's, Azure's, Google auth's): an endpoint
    that does not answer, no credentials; else None. It names the location and the cause on one line."""
    if isinstance(exc, OSError):
        return None
    names = {cls.__name__ for cls in type(exc).__mro__ if cls.__module__.startswith(_CLIENT_MODULES)}
    if not names:
        return None
    cause = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if names & _NO_CREDENTIALS:
        return StorageError(f"{uri}: no usable credentials for the storage ({cause}); give them in the storage options "
                            "or the connection")
    if names & _UNREACHABLE:
        return StorageError(f"{uri}: cannot reach the storage ({cause}); check the endpoint and the network")
    return StorageError(f"{uri}: the storage failed ({cause})")


def _typed_storage_errors(method: Callable) -> Callable:
    """``method`` of :class:`Storage`, raising :func:`unreachable_storage_error`'s typed error for the store's
    client's own errors."""

    @functools.wraps(method)
    def call(self: Storage, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            typed = unreachable_storage_error(self.uri, exc)
            if typed is None:
                raise
            raise typed from exc

    return call


# Every operation that reaches the store: an unreachable store or missing credentials is a StorageError
# (exit 2 in the CLI, one failed job in a lake run), never the client's traceback.
for _name in ("read_bytes", "read_many", "open_read", "write_bytes", "create_exclusive", "exists", "list_names",
              "list_directory", "delete", "move_aside", "remove_empty_dirs", "delete_files"):
    setattr(Storage, _name, _typed_storage_errors(getattr(Storage, _name)))


def malformed_uri(text: str) -> str | None:
    """What ``text`` should have been when it is a URI with a mistyped ``://`` (``iceberg:/db.orders``,
    ``s3:bucket/t``), else None. Only a known scheme counts: a local name with a colon (``orders:v2``) is a
    name; ``file:/x`` is fsspec's own form of a local path, and ``a::b://`` chains filesystems."""
    scheme, colon, rest = text.partition(":")
    if not colon or rest.startswith(("//", ":")) or len(scheme) < 2 or scheme.lower() == "file":
        return None
    if scheme.lower() not in _URI_ONLY_SCHEMES and scheme.lower() not in fsspec.available_protocols():
        return None
    return f"{scheme}://{rest.lstrip('/')}"


def check_malformed_uri(text: str, what: str = "table location") -> None:
    fixed = malformed_uri(text)
    if fixed is not None:
        raise InvalidArgumentError(f"{what} {text!r} is a malformed URI (a scheme needs '://'): did you mean {fixed!r}?")


def check_location(uri: object) -> str:
    """A table location as text: a non-blank string (or path object) naming more than a protocol."""
    if isinstance(uri, os.PathLike):
        uri = os.fspath(uri)
    if not isinstance(uri, str):
        raise InvalidArgumentError(f"table location must be a path or URL string, got {type(uri).__name__} {uri!r}")
    if not uri.strip():
        raise InvalidArgumentError(f"table location must not be empty or blank (that is the current directory), got {uri!r}")
    if uri != uri.strip():
        raise InvalidArgumentError(f"table location {uri!r} must not start or end with spaces")
    check_malformed_uri(uri)
    if not fsspec.core.split_protocol(uri)[1].strip("/"):
        raise InvalidArgumentError(f"table location {uri!r} names no path (only a protocol)")
    return uri
