"""A pyiceberg FileIO over this package's counted Storage, for the commits this package writes itself.

Compaction and manifest rewriting (compaction.py, manifest_rewrite.py) let pyiceberg's own
writers encode Parquet and manifest lists, and write manifests as pyiceberg's writer does
(manifest_avro.py), so every file is what pyiceberg would write. Their bytes go through :class:`~airflow_snaptable.core.io.storage.Storage`: each read and
each write is one counted operation that crash injection sees, and a written file appears whole
or not at all. Only files inside the table location are handled (the Locator's rule).
"""

from __future__ import annotations

import io

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream

from airflow_snaptable.core.formats.iceberg.files import Locator
from airflow_snaptable.core.io.storage import Storage


class _Buffer(io.BytesIO):
    """Collects a file's bytes; closing it writes them as one storage operation."""

    def __init__(self, output: "CountedOutputFile"):
        super().__init__()
        self._output = output

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            self._output.written(data)
        super().close()


class CountedOutputFile(OutputFile):
    def __init__(self, file_io: "CountedFileIO", location: str):
        super().__init__(location)
        self._io = file_io
        self._length: int | None = None

    def __len__(self) -> int:
        if self._length is None:
            raise ValueError(f"{self.location} is not written yet")
        return self._length

    def exists(self) -> bool:
        return self._io.storage.exists(self._io.relative(self.location))

    def to_input_file(self) -> InputFile:
        return self._io.new_input(self.location)

    def create(self, overwrite: bool = False) -> OutputStream:
        return _Buffer(self)

    def written(self, data: bytes) -> None:
        self._io.storage.write_bytes(self._io.relative(self.location), data)
        self._length = len(data)
        self._io.written.append(self.location)


class CountedInputFile(InputFile):
    def __init__(self, file_io: "CountedFileIO", location: str, length: int | None = None):
        super().__init__(location)
        self._io = file_io
        self._length = length

    def __len__(self) -> int:
        if self._length is None:
            self._length = self._io.storage.fs.size(self._io.storage.full_path(self._io.relative(self.location)))
        return self._length

    def exists(self) -> bool:
        return self._io.storage.exists(self._io.relative(self.location))

    def open(self, seekable: bool = True) -> InputStream:
        """The whole file, read in one counted operation (the files read here are manifests and the small
        files a compaction merges, read whole anyway)."""
        import pyarrow as pa

        data = self._io.storage.read_bytes(self._io.relative(self.location))
        self._length = len(data)
        return pa.BufferReader(data)


class CountedFileIO(FileIO):
    """Reads and writes the files of one table location through ``storage``; records what it wrote."""

    def __init__(self, storage: Storage, location: str, properties: dict | None = None):
        super().__init__(dict(properties or {}))
        self.storage = storage
        self._locator = Locator(location)
        #: Every file written, in order: what a failed commit removes again.
        self.written: list[str] = []
        #: Live entries of the manifests read, by path (replace_commit.live_entries).
        self.entries: dict[str, list] = {}
        #: Manifests of the manifest lists read, by path (replace_commit.snapshot_manifests).
        self.manifest_lists: dict[str, list] = {}

    def relative(self, location: str) -> str:
        return self._locator.inside(location, "file")

    def new_input(self, location: str) -> InputFile:
        return CountedInputFile(self, location)

    def new_output(self, location: str) -> OutputFile:
        return CountedOutputFile(self, location)

    def delete(self, location) -> None:
        path = location if isinstance(location, str) else location.location
        self.storage.delete(self.relative(path))

    def delete_written(self) -> None:
        """Remove what this IO wrote (a commit that certainly did not land); what cannot go is left to orphan removal."""
        written, self.written = self.written, []
        try:
            self.storage.delete_files([self.relative(path) for path in written])
        except OSError:
            pass
