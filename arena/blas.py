"""One BLAS thread, unless the user says otherwise, for the commands that import this first.

BLAS reads its thread count once, when numpy loads, so this must be imported before numpy is:
``arena report`` and ``arena lab`` import it at the top of their modules. Their matrix
products are small (a report's bootstrap is 2,000 draws × ~100 markets × a few dozen cohorts),
and OpenBLAS's extra threads gain nothing there and spin on a shared machine: the 26-cohort
report took 0.56 CPU-s with OpenBLAS's default on the 2 busy cores and 0.40 with one thread
(its leaderboard 0.15 → 0.05). Where numpy is already loaded, as under pytest, this changes
nothing.
"""

import os

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

for _name in THREAD_VARIABLES:
    os.environ.setdefault(_name, "1")
