"""Where an Apache Iceberg table keeps its noncurrent journal (core/lifecycle/noncurrent/journal.py): in the
table's ``snaptable/`` directory, which neither Iceberg's orphan cleaning nor ours lists."""

from __future__ import annotations

from airflow_snaptable.core.formats.iceberg.files import LIFECYCLE_DIR
from airflow_snaptable.core.io.storage import Storage
from airflow_snaptable.core.lifecycle.noncurrent.journal import NoncurrentJournal

JOURNAL_DIR = f"{LIFECYCLE_DIR}/noncurrent"


def journal_of(storage: Storage) -> NoncurrentJournal:
    return NoncurrentJournal(storage, JOURNAL_DIR)


def expiry_plans_in_flight(storage: Storage) -> list[str]:
    """The expiry plans up now (core/formats/iceberg/expire.py writes them before its commit and drops them
    after its delete; a crashed run's stays until the next expiry finishes it): undo's fence."""
    return sorted(n for n in storage.list_names(f"{LIFECYCLE_DIR}/plan") if n.startswith("expire-") and n.endswith(".json"))
