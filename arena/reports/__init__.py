"""What a log says, read back from the log alone, and its renderings.

* ``model``: the read model: report data, intervals, standings as plain data (``--json``).
* ``terminal``: the same as Rich tables, the answer first.
* ``html`` + ``charts``: one self-contained HTML page, hand-written SVG charts.
* ``equity``: equity curves, folded mark by mark.
* ``tables`` + ``export``: the read models as columns; CSV, Parquet, SQLite tables.
* ``notebook``: ``arena.open_run`` for a notebook.
"""
