"""``arena step``: a cohort's log walked through a stop at a time in a terminal, finished or
as a replay writes it.

What the screen shows at a cut is a projection of the log cut there (the fold ``arena report``
runs), never anything the runner kept to itself: a live replay runs in a process of its own,
moved on a step at a time, and the view reads the log it writes. A module for each part:

* ``timeline``: ``LogTimeline``, a cohort's log as a line with its stops (after each decision,
  after each resolution, the end) and its state at any cut, folded from the nearest base (a
  log snapshot, or a checkpoint laid down while nobody presses keys).
* ``log``: a finished log read as the timeline needs it: one SQLite scan of the facts, the
  events a page at a time, each page's links checked before it is decoded.
* ``live``: ``LiveRun``, the replay in a child process moved on by request, each ``Step`` the
  runner yields sent back through a pipe as it is; ``LogTail``, its log read forward.
* ``view``: ``build_view``, what the screen shows for one agent at a cut, a ``Screen`` of
  plain data.
* ``panels``: each panel of the screen as Rich text, read off a ``Screen``.
* ``widgets``: the Textual widgets the app draws with: ``Lines``, a panel drawn a row at a time
  and only the rows that changed; ``HelpScreen``, the keys.
* ``app``: ``StepApp``, the Textual app (the ``tui`` extra): keys move the cut and the agent.
* ``frames``: the printed output's frames, one per decision of an agent: what it saw, decided
  and got, its portfolio before, after its orders and at its next decision; ``fit`` for a
  terminal's height.
* ``printed``: the frames laid out as text or JSON, and the standings at the end of the log:
  what ``arena step`` prints when there are no keys to read.

The command (``arena.commands.step``) parses the options and picks the app or the printed
frames.
"""
