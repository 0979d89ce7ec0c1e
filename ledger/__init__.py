"""The event-sourced core: events, the append-only store, the broker rules, projections, metrics.

Imports nothing from ``replays``, ``strategies`` or ``arena``, and does no network I/O.
"""
