"""The plugin boundary: everything between the replay loop and a strategy's code.

The loop (``arena.run.runner``) trades, settles and records; this wing owns the contract with the
plugin on the other side, a module for each part of it:

* ``past``: **what a plugin sees** of the past. ``Past`` holds the universe's price points *up to
  the instant being decided*, copied in as time passes: memory that has no future in it, so a
  view cannot hand one out however it is asked. Every array a view hands out is a copy the
  plugin owns or a read-only buffer whose ultimate owner is read-only (``frozen``).
* ``views``: each agent's ``View`` of an instant, built by ``Views`` over those buffers.
* ``sandbox``: **what a plugin may do while it runs**: the frozen clock, the time limit, anything
  raised turned into an error text, a real Ctrl-C kept apart from a plugin's, the process-level
  calls that could end or fork the run replaced while it runs.
* ``checks``: **what a plugin may return**: ``checked`` turns a decision into builtin, bounded
  values, or says why it cannot.
* ``agents``: the agent as the loop calls it; ``InProcess`` in the replay's own process.
* ``isolated``: ``--isolate``, each agent in a worker process of its own.

What in-process protection cannot stop: code in the same interpreter can walk
``gc.get_objects()`` to the tape or the broker, patch classes, use ``ctypes`` to write any
memory, call functions it bound before the run began, or swallow the time limit's exception in a
loop. ``isolated`` runs each agent in its own process for code you do not trust, and
``arena verify --tape`` re-checks every fill against the tape.
"""
