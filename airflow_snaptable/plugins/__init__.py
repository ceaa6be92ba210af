"""The Airflow plugin of this provider: the tables' timelines in the Airflow UI (plugins/snaptable.py)."""
