"""The Airflow plugin: the timeline pictures of the tables of ``snaptable`` connections, in the Airflow UI.

Registered through the ``airflow.plugins`` entry point (pyproject.toml) only. Airflow loads
entry-point plugins always; a provider info ``plugins`` key as well would load it a second time
when providers are discovered eagerly (``[core] lazy_discover_providers = False``), and Airflow
reports that second load as a plugin import error ("already registered").

What it adds to the API server (Airflow 3's plugin interface, no Flask):

- ``fastapi_apps``: the read-only pages of plugins/timeline_app.py, mounted at ``/snaptable``;
- ``external_views``: a "Snapshot table timelines" entry in the UI's Browse menu that shows
  ``/snaptable/`` inside the UI.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_snaptable.plugins.timeline_app import URL_PREFIX, app

PLUGIN_NAME = "snaptable"


class SnapTablePlugin(AirflowPlugin):
    name = PLUGIN_NAME
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "snaptable timelines"}]
    external_views = [
        {
            "name": "Snapshot table timelines",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "snaptable-timelines",
        }
    ]
