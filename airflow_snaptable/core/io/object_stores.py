"""The object stores a table can commit to: S3, Google Cloud Storage and Azure Blob Storage.

Each gives the two things ``Storage`` needs beyond plain reads and writes:

- the commit point, an atomic create-if-absent of one object: S3 ``PUT`` with ``If-None-Match: *``
  (s3fs ``mode="create"``), GCS an upload with ``ifGenerationMatch=0`` (gcsfs ``mode="create"``),
  Azure ``Put Blob`` with ``If-None-Match: *`` (adlfs ``mode="create"``, ``upload_blob(overwrite=False)``).
  The store decides which of two racing creates wins and refuses the other (412/409): the loser
  learns it lost, nothing is overwritten;
- bulk deletes in the store's batch API: S3 ``DeleteObjects`` (1,000 keys a request), GCS JSON
  API batch (100 deletes a request), Azure blob batch (256 deletes a request).

Every other fsspec protocol has no create-if-absent this package can rely on, so commits there
are refused (``UnsupportedStorageError``) rather than made unsafe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from airflow_snaptable.core.errors import StorageError

_PRECONDITION_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}


@dataclass(frozen=True)
class ObjectStore:
    """How one object store commits (``create_exclusive``) and deletes in bulk (``delete_batch``)."""

    #: A name for messages and docs ("S3", "GCS", "Azure Blob Storage").
    name: str
    #: fsspec protocols that reach this store.
    protocols: frozenset[str]
    #: The package extra that installs its fsspec filesystem (``airflow-snaptable[<extra>]``).
    extra: str
    #: Objects deleted per request of the store's batch API.
    delete_batch: int
    #: ``delete_batch_paths(fs, paths)``: delete up to ``delete_batch`` objects (fs paths) in one request;
    #: a missing object is success, any other failure raises.
    delete_batch_paths: Callable[[object, list[str]], None]

    def create_exclusive(self, fs, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` if no object is there; False, writing nothing, if one is."""
        try:
            fs.pipe_file(path, data, mode="create")
        except Exception as exc:  # noqa: BLE001 - classified below
            if is_precondition_failure(exc):
                return False
            raise
        return True


def is_precondition_failure(exc: BaseException) -> bool:
    """True when a create-if-absent failed because the object exists already.

    gcsfs and adlfs raise FileExistsError for it. s3fs does for some servers (AWS, moto) but a plain
    OSError for others (SeaweedFS): the botocore error code in the exception chain tells there.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, FileExistsError):
            return True
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            status = str(response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if code in _PRECONDITION_CODES or status in {"412", "409"}:
                return True
        if "PreconditionFailed" in str(current) or "ConditionalRequestConflict" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


# -- S3 ----------------------------------------------------------------------------------------


def _delete_s3(fs, paths: list[str]) -> None:
    try:
        fs.rm(paths)  # s3fs: one DeleteObjects request per 1,000 keys
    except FileNotFoundError:
        pass


# -- Google Cloud Storage ------------------------------------------------------------------------

#: Statuses of one delete inside a GCS batch that are worth sending again (rate limits, server errors).
_GCS_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_GCS_BATCH_ATTEMPTS = 4
_GCS_BOUNDARY = "snaptable-batch-boundary"


def _delete_gcs(fs, paths: list[str]) -> None:
    """One JSON-API batch request (``POST /batch/storage/v1``) of up to 100 ``DELETE`` requests.

    gcsfs's own ``rm`` batches only on storage.googleapis.com, and its batch body ends each inner
    request without the blank line HTTP requires (GCS forgives it, emulators do not), so the request is
    built here, sent through gcsfs's authenticated ``_call``. A 404 inside the batch is success.
    """
    from fsspec.asyn import sync

    sync(fs.loop, _delete_gcs_async, fs, list(paths))
    fs.invalidate_cache()


async def _delete_gcs_async(fs, paths: list[str]) -> None:
    import asyncio
    from urllib.parse import quote

    failed: list[tuple[str, int | None]] = []
    pending = paths
    for attempt in range(_GCS_BATCH_ATTEMPTS):
        parts = []
        for i, path in enumerate(pending):
            bucket, key, _generation = fs.split_path(path)
            parts.append(
                f"--{_GCS_BOUNDARY}\r\nContent-Type: application/http\r\nContent-ID: <{i}>\r\n\r\n"
                f"DELETE /storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')} HTTP/1.1\r\n"
                "Content-Length: 0\r\n\r\n"
            )
        body = "\r\n".join(parts) + f"\r\n--{_GCS_BOUNDARY}--\r\n"
        headers, content = await fs._call(
            "POST",
            fs.batch_url_base,
            headers={"Content-Type": f'multipart/mixed; boundary="{_GCS_BOUNDARY}"'},
            data=body.encode(),
        )
        statuses = _gcs_batch_statuses(headers, content, len(pending))
        retry = [path for path, status in zip(pending, statuses) if status in _GCS_RETRY_STATUSES]
        failed = [(path, status) for path, status in zip(pending, statuses) if status not in (200, 204, 404) and status not in _GCS_RETRY_STATUSES]
        if failed or not retry:
            break
        pending = retry
        if attempt + 1 < _GCS_BATCH_ATTEMPTS:
            await asyncio.sleep(0.2 * 2**attempt)
    else:
        failed = [(path, None) for path in pending]
    if failed:
        raise StorageError(f"GCS batch delete: {len(failed)} of {len(paths)} objects not deleted, first: {failed[0]}")


def _gcs_batch_statuses(headers, content: bytes, expected: int) -> list[int | None]:
    """The status of each inner response, in request order (their Content-IDs are ``response-<i>``)."""
    content_type = headers.get("Content-Type", "") if hasattr(headers, "get") else ""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        raise StorageError(f"GCS batch delete: the answer is not multipart ({content_type!r})")
    statuses: list[int | None] = [None] * expected
    for part in content.decode("utf-8", "replace").split("--" + match.group(1)):
        index = re.search(r"Content-ID:\s*<response-(\d+)>", part, re.IGNORECASE)
        status = re.search(r"HTTP/[0-9.]+ (\d{3})", part)
        if index and status and int(index.group(1)) < expected:
            statuses[int(index.group(1))] = int(status.group(1))
    return statuses


# -- Azure Blob Storage ----------------------------------------------------------------------------


def _delete_azure(fs, paths: list[str]) -> None:
    """One blob batch request (``delete_blobs``) per container, up to 256 deletes; a 404 inside it is success.

    An account that refuses blob batch as a whole (Azure documented it as unavailable on hierarchical
    namespace accounts, ADLS Gen2) gets the same deletes one blob a request, concurrently.
    """
    from fsspec.asyn import sync

    by_container: dict[str, list[str]] = {}
    for path in paths:
        container, blob, _version = fs.split_path(path)
        by_container.setdefault(container, []).append(blob)
    failed = sync(fs.loop, _delete_azure_async, fs, by_container)
    fs.invalidate_cache()
    if failed:
        raise StorageError(f"Azure blob batch delete: {len(failed)} of {len(paths)} blobs not deleted, first: {failed[0]}")


async def _delete_azure_async(fs, by_container: dict[str, list[str]]) -> list[tuple[str, object]]:
    import asyncio

    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    async def delete_one(client, blob: str) -> tuple[str, object] | None:
        try:
            await client.delete_blob(blob)
        except ResourceNotFoundError:
            return None  # gone already, which is success
        except HttpResponseError as exc:
            return (blob, exc.status_code)
        return None

    failed: list[tuple[str, object]] = []
    for container, blobs in by_container.items():
        async with fs.service_client.get_container_client(container) as client:
            try:
                responses = await client.delete_blobs(*blobs, raise_on_any_failure=False)
            except HttpResponseError:
                # The batch request itself refused (not one of its deletes): one request a blob.
                outcomes = await asyncio.gather(*(delete_one(client, blob) for blob in blobs))
                failed += [outcome for outcome in outcomes if outcome is not None]
                continue
            async for response in _aiter(responses):
                status = int(response.status_code)
                if status not in (200, 202, 204, 404):
                    failed.append((response.request.url, status))
    return failed


async def _aiter(responses):
    # azure.storage.blob.aio returns an async iterator of the sub-responses
    if hasattr(responses, "__aiter__"):
        async for response in responses:
            yield response
    else:
        for response in responses:
            yield response


S3 = ObjectStore("S3", frozenset({"s3", "s3a"}), "s3", 1000, _delete_s3)
GCS = ObjectStore("GCS", frozenset({"gs", "gcs"}), "gcs", 100, _delete_gcs)
AZURE = ObjectStore("Azure Blob Storage", frozenset({"abfs", "abfss", "az"}), "azure", 256, _delete_azure)
OBJECT_STORES = (S3, GCS, AZURE)


def object_store_of(protocols: tuple[str, ...] | list[str]) -> ObjectStore | None:
    """The object store an fsspec filesystem with these protocols reaches, or None."""
    for store in OBJECT_STORES:
        if store.protocols.intersection(protocols):
            return store
    return None
