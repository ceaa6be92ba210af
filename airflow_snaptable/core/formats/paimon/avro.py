"""Paimon's Avro metadata files (manifest lists, manifests, index manifests), read with fastavro."""

from __future__ import annotations

import io

import fastavro

from airflow_snaptable.core.errors import CorruptMetadataError, UnsupportedMetadataError


def read_avro(data: bytes, where: str) -> list[dict]:
    try:
        return list(fastavro.reader(io.BytesIO(data)))
    except ValueError as exc:
        if "codec" in str(exc):
            raise UnsupportedMetadataError(f"{where}: {exc}") from exc
        raise CorruptMetadataError(f"{where}: cannot read Avro: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any parse failure is corruption
        raise CorruptMetadataError(f"{where}: cannot read Avro: {exc}") from exc
