"""``arena lab``: forecastbench's synthetic experiments (origins §2.5, §2.7; seed 000).

On a parity market the truth f(z) is known, so a forecaster's calibration error, group bias
and arbitrage gap can be measured against it, and each experiment checks its own analytic facts
(``checks.py``) with tolerances derived from the sampling variance. ``parity.py`` is the data
and the closed-form forecasters, ``cube.py`` the subcube group biases, ``experiments.py`` the
five experiments, ``llm.py`` the bridge to the project's LLM forecaster; the command is
``arena.commands.lab``.
"""
