"""Many cohorts on an engine, delivered to one log in a fixed order.

* ``base``: what every engine shares: ``TapeSource`` (a tape loaded once per process, and its
  file for workers elsewhere), ``CohortWork``, the ``Engine`` protocol, ``EngineError``.
* ``local``: ``--engine local``, a pool of spawned worker processes on this machine.
* ``ray``: ``--engine ray`` (the optional ``ray`` extra), cohorts as Ray tasks.
* ``recorded``: a cohort recorded into a list-backed sink by a worker, and delivered to the log.
* ``driver``: ``replay_cohorts``, the one writer: it plans, runs the cohorts on an engine and
  appends each recording in the cohorts' order, so the chain, head and digest do not depend on
  the engine or the worker count; resumable by cohort.
"""
