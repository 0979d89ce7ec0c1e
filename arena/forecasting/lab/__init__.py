"""``arena lab``: forecastbench's synthetic experiments (methodology §2.5, §2.7; seed 000).

On a parity market the truth f(z) is known, so a forecaster's calibration error, group bias
and arbitrage gap can be measured against it, and each experiment checks its own analytic facts
(``checks.py``) with tolerances derived from the sampling variance. ``parity.py`` is the data
and the closed-form forecasters, ``cube.py`` the subcube group biases, ``experiments.py`` the
five experiments, ``llm.py`` the bridge to the project's LLM forecaster; the command is
``arena.commands.lab``.

One BLAS thread unless the user says otherwise (``arena.blas``), because ``arena lab`` loads
numpy through this package: the denoiser's small matrix products gain nothing from a second
thread and lose much to its spinning. On this 2-core machine, busy with other work, a training
step at the seed's size (batch 256, hidden 256, depth 3) took 0.08 s (0.03 CPU-s) with one
thread and 0.64 s (0.21 CPU-s) with OpenBLAS's default; the seed's difftrain took 35 min that
way.
"""

from arena import blas  # noqa: F401  (before numpy loads)
