"""Forecasts scored apart from trading: forecastbench's metrics, experiments and data.

* ``scorefile`` + ``score``: ``arena score``, a file of resolved forecasts checked row by row and
  scored (forecastbench's ``pm_eval`` and more).
* ``diffusion_data``: a tape's resolved markets as the market diffusion model reads them, and
  ``arena diffusion eval``'s held-out rows.
* ``lab``: ``arena lab``, forecastbench's synthetic experiments with their analytic checks.
"""
