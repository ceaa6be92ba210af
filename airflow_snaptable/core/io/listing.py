"""One directory's listing, for ``Storage.iter_files``: the files (with size and modification time)
and the subdirectories directly under it, on local files with ``os.scandir`` and on any other
fsspec filesystem (S3: one delimited, paginated listing) with ``ls(detail=True)``."""

from __future__ import annotations

import os

#: (path relative to the table root, size, modified epoch seconds or None if unknown)
ListedFile = tuple[str, int, "float | None"]


def list_directory(fs, root: str, path: str, *, local: bool, follow_links: bool = False) -> tuple[list[ListedFile], list[str]]:
    """The files (sorted) and the subdirectories (relative to ``root``) directly under ``path``; both
    empty if it does not exist (or vanished: an expiry removing an emptied partition). ``path``
    naming a file lists that file, as ``fs.find`` does.

    A symbolic link to a directory below ``path`` is left out unless ``follow_links``: what it
    reaches may be another table's files, which a walk of this table (orphan cleaning, ``verify``)
    would take for its own. (``path`` itself may be a link: a table whose ``data/`` is one.) Lake
    discovery follows links by its own rule (core/lake/discovery.py)."""
    prefix = root.rstrip("/") + "/"

    def relative(full: str) -> str:
        return full[len(prefix):] if full.startswith(prefix) else full

    files: list[ListedFile] = []
    directories: list[str] = []
    if local:
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir():
                        if follow_links or not entry.is_symlink():
                            directories.append(relative(entry.path))
                        continue
                    try:
                        info = entry.stat()
                    except FileNotFoundError:
                        continue  # deleted since the directory was read
                    files.append((relative(entry.path), info.st_size, info.st_mtime))
        except FileNotFoundError:
            return [], []
        except NotADirectoryError:
            try:
                info = os.stat(path)
            except FileNotFoundError:
                return [], []
            return [(relative(path), info.st_size, info.st_mtime)], []
        return sorted(files), directories
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return [], []
    own = path.rstrip("/")
    for info in entries:
        raw = str(info.get("name", ""))
        name = raw.rstrip("/")
        if raw.endswith("/"):
            continue  # a directory marker (SeaweedFS lists an emptied directory as "<dir>/"), never a file
        if info.get("type") == "directory":
            if name != own:  # some S3 servers (SeaweedFS) list an emptied directory as itself
                directories.append(relative(name))
            continue
        files.append((relative(name), int(info.get("size") or 0), modified_seconds(info)))
    return sorted(files), directories


def modified_seconds(info: dict) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return None
