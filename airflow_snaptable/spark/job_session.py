"""The maintenance job's Spark session, paid for only when the work needs Spark.

A spark-submit of the job pays, before any table is touched: the launcher and driver JVMs,
the Python driver, and the SparkContext (scheduler, block manager, UI, executors; 3-5 s on a
loaded 2-core machine, docs/benchmarks.md). Most of a small lake's or a small table's work never
leaves the driver (the thresholds keep it there), so:

- :class:`JobSpark` reads the submitted Spark conf through the gateway spark-submit started
  (no SparkContext needed), and starts the SparkSession on first use of :attr:`JobSpark.sparkContext`.
  A lake kept on the driver in client deploy mode thus runs in the spark-submit's driver
  process without ever registering a Spark application; ``spark.snaptable.lazySession=false``
  starts the session at once (the application then exists for the whole run, as before), and so
  does an event log asked for (``spark.eventLog.enabled=true``: the application is to be on record).
  Cluster deploy mode always starts it: YARN's application master fails a driver that never
  creates its SparkContext.
- The session the job starts has the Spark UI off (:data:`JOB_SESSION_DEFAULTS`; the job is a
  batch of maintenance calls, not something to watch): a conf given to spark-submit wins.
- The driver JVM's own start-up is shortened by the runner (spark/jvm_startup.py).

The executors' check (spark/executor_check.py) runs when work first goes to them.
Importing this module imports neither pyspark nor airflow.
"""

from __future__ import annotations

from typing import Any, Mapping

#: Spark conf: ``false`` starts the job's SparkSession at once, not when work first needs it.
LAZY_SESSION_CONF = "spark.snaptable.lazySession"

#: Set on the job's SparkSession unless the submitted conf sets them.
JOB_SESSION_DEFAULTS = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


def submitted_conf() -> dict[str, str]:
    """The Spark conf spark-submit was given, read without starting a SparkContext.

    spark-submit hands its conf to the driver as the JVM's ``spark.*`` system properties (what
    ``SparkConf()`` loads). Under spark-submit they are read through its gateway with py4j alone:
    importing pyspark and loading ``SparkConf`` in the JVM cost 1-2 s of a small job's start-up
    (docs/benchmarks.md). Elsewhere (no gateway yet), through pyspark.
    """
    import os

    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        return dict(SparkConf().getAll())
    from py4j.clientserver import ClientServer, JavaParameters, PythonParameters
    from py4j.java_gateway import GatewayParameters, JavaGateway

    port, secret = int(os.environ["PYSPARK_GATEWAY_PORT"]), os.environ["PYSPARK_GATEWAY_SECRET"]
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() == "true":  # the gateway's kind, as pyspark picks it
        gateway = ClientServer(java_parameters=JavaParameters(port=port, auth_token=secret, auto_convert=True),
                               python_parameters=PythonParameters(port=0, eager_load=False))
    else:
        gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auth_token=secret, auto_convert=True))
    try:
        properties = gateway.jvm.java.lang.System.getProperties()
        return {str(key): str(properties.getProperty(key)) for key in properties.stringPropertyNames()
                if str(key).startswith("spark.")}
    finally:
        gateway.close()  # this connection only: the gateway itself serves pyspark if a session starts


class JobSpark:
    """The job's Spark: its conf at once, its SparkSession (``session``/``sparkContext``) on first use.

    ``secret_conf``: confs the runner handed over in the secrets file (spark/handoff.py), set on the
    session when it starts and read here before the submitted conf (they override it).
    """

    def __init__(self, app_name: str, secret_conf: Mapping[str, str] | None = None, redaction_regex: str | None = None):
        self.app_name = app_name
        self.secret_conf = dict(secret_conf or {})
        self.redaction_regex = redaction_regex
        self._conf = None
        self._session = None

    @property
    def started(self) -> bool:
        return self._session is not None

    def get_conf(self, key: str, default: Any = None) -> Any:
        if key in self.secret_conf:
            return self.secret_conf[key]
        if self._session is not None:
            return self._session.sparkContext.getConf().get(key, default)
        if self._conf is None:
            self._conf = submitted_conf()
        return self._conf.get(key, default)

    def must_start(self) -> bool:
        """Whether the session starts now: asked to; a cluster-mode driver (its master waits for one); or an
        event log asked for (``spark.eventLog.enabled``: the author wants the application on record)."""
        def true(key: str, default: str) -> bool:
            return str(self.get_conf(key, default)).strip().lower() == "true"

        return (not true(LAZY_SESSION_CONF, "true") or self.get_conf("spark.submit.deployMode", "client") == "cluster"
                or true("spark.eventLog.enabled", "false"))

    @property
    def session(self):
        if self._session is None:
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.appName(self.app_name)
            if self.redaction_regex:
                builder = builder.config("spark.redaction.regex", self.redaction_regex)
            for key, value in JOB_SESSION_DEFAULTS.items():
                if self.get_conf(key) is None:
                    builder = builder.config(key, value)
            for key, value in self.secret_conf.items():
                builder = builder.config(key, value)
            self._session = builder.getOrCreate()
        return self._session

    @property
    def sparkContext(self):  # noqa: N802 - SparkSession's name: code given a session or a JobSpark reads the same
        return self.session.sparkContext

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()


def conf_value(spark, key: str, default: Any = None) -> Any:
    """``key`` of a SparkSession's or a :class:`JobSpark`'s conf (the latter without starting its session)."""
    if isinstance(spark, JobSpark):
        return spark.get_conf(key, default)
    return spark.sparkContext.getConf().get(key, default)
