"""Local files written so that readers see the old or the new bytes, never a part.

- A replace writes a temp file in the same directory, fsyncs it and renames it over the target.
  A durable replace then fsyncs the directory (a rename is durable only once its directory is)
  and the parent of every directory it found missing, so that after a power loss the file is
  there under its name on any POSIX filesystem, not only where journaling orders it (ext4).
- A create-if-absent (the commit point of a snapshot on local disk) hard-links the fsynced temp
  file to the target: ``link`` fails if the target exists, and the target appears whole.
- A writer's directory may be removed by an empty-directory clean between ``makedirs`` and
  ``open`` (core/io/storage.py ``remove_empty_dirs``): the open fails and the directory is made
  again. Once the temp file exists the directory is not empty, so ``rmdir`` leaves it.
"""

from __future__ import annotations

import os
import uuid

from airflow_snaptable.core.errors import StorageError


def write_replace(path: str, data: bytes, durable: bool) -> None:
    tmp = _temp_name(path)
    fresh = missing_directories(os.path.dirname(path)) if durable else []
    try:
        with open_new(tmp) as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise
    if durable:
        sync_entries(path, fresh)


def create_exclusive(path: str, data: bytes) -> bool:
    tmp = _temp_name(path)
    fresh = missing_directories(os.path.dirname(path))
    try:
        with open_new(tmp) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageError(f"atomic create of {path} failed: {exc}") from exc
        sync_entries(path, fresh)
        return True
    finally:
        unlink_quietly(tmp)


def open_new(path: str, attempts: int = 5):
    """Open a new file for writing, creating its directory, again if a racing clean removed it."""
    for attempt in range(attempts):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            return open(path, "wb")
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def missing_directories(directory: str) -> list[str]:
    """The directories of ``directory``'s path that do not exist yet, outermost first."""
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing[::-1]


def sync_entries(path: str, fresh_directories: list[str]) -> None:
    """Make ``path``'s directory entry durable, and the entries of the directories made for it.

    A directory found missing may have been created by this writer or a racing one; either way
    its entry in its parent is synced here, since the racing writer may not sync it (hints).
    """
    directories = {os.path.dirname(path)} | {os.path.dirname(d) for d in fresh_directories}
    for directory in sorted(directories, key=len, reverse=True):
        fsync_dir(directory)


def unlink_all_quietly(paths: list[str]) -> None:
    for path in paths:
        unlink_quietly(path)


def fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_name(path: str) -> str:
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
