"""``arena verify``: proving a log was not altered, cut or extended, and that it rebuilds exactly.

* ``log``: the whole check: chain, checking fold, snapshots, the recorded head; the log cut into
  seq ranges at snapshots, a core each.
* ``ranges``: one range, its chain and checking fold in one read (``python -m
  arena.verify.ranges``, what each core runs).
* ``fills``: ``verify --tape``, every fill against the tape's prices and the rules.
"""
