"""A table's life as a picture: what ``snaptable timeline`` and the Airflow UI plugin show.

- ``model.py``: ``build_timeline(table)`` reads a ``Table`` once into a ``Timeline`` of plain values;
- ``render.py``: the ``Timeline`` drawn as standalone SVG, and an HTML page around it.

May import: ``Table`` (core/table.py) and everything below it; nothing in core imports this.
"""
