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
- A temp file is named after its target and its writer: ``.<target>.<host>-<pid>.<random>.tmp``,
  where ``<host>`` stands for this machine's boot and pid namespace. A process killed between
  writing it and renaming it (kill -9, a power loss) leaves it behind; it is *abandoned* once its
  writer is provably gone (same host token, pid no longer running) or once it is older than
  ABANDONED_TEMP_SECONDS, far longer than any one write takes. Only abandoned temp files are
  removed (:func:`is_abandoned_temp`): a live writer's rename must find its temp file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
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


#: A temp file lives for one write (a large deletion plan takes seconds): one this old lost its writer.
ABANDONED_TEMP_SECONDS = 600
_OWNED_TEMP = re.compile(r"\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]{1,10})\.[0-9a-f]{16}\.tmp$")


@functools.cache
def host_token() -> str:
    """This machine's boot and pid namespace, hashed: a pid names the same process only where both match."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    except OSError:
        pass  # not Linux: the host name alone (a pid reused after a reboot only keeps a temp file longer)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]


def _temp_name(path: str) -> str:
    # 16 random hex digits besides the writer: a 200-byte tag name's temp file stays under 255 bytes.
    owner = f"{host_token()}-{os.getpid()}.{uuid.uuid4().hex[:16]}"
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{owner}.tmp")


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except Exception:  # noqa: BLE001 - another user's process (PermissionError), or a pid the system refuses: running
        return True
    return True


def is_abandoned_temp(name: str, mtime: float | None, now: float) -> bool:
    """Is ``name`` the temp file of an atomic write whose writer is gone (module rules)?

    For directories whose only hidden ``.tmp`` files are write temps (of this module, or of another
    engine's writer, which only age tells). ``mtime`` and ``now`` are epoch seconds of the storage.
    """
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    if mtime is not None and now - mtime > ABANDONED_TEMP_SECONDS:
        return True
    owner = _OWNED_TEMP.search(name)
    return owner is not None and owner["host"] == host_token() and not _running(int(owner["pid"]))
