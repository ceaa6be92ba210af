"""airflow-snaptable: snapshot tables for Apache Airflow and Spark.

The table format lives in :mod:`airflow_snaptable.core` (pyarrow + fsspec only);
Spark, Airflow and the CLI are front ends over the same core calls.
"""

__version__ = "0.1.0"
