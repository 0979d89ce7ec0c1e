"""A strategy against the baselines over many cohorts, and a grid of its settings.

* ``backtest``: ``plan_backtest`` / ``run_backtest``: the strategy and the comparison agents in
  one cohort per start, the leaderboard with paired differences and their intervals.
* ``sweep``: ``arena sweep``: grids and sweep files, one cohort per setting and start beside one
  shared cohort of comparison agents, the results and the selection warning.
* ``page``: a backtest's HTML page, from the parts in ``arena.reports.html``.
"""
