"""``arena step``'s terminal app (Textual, the ``tui`` extra): keys move a cut through the log.

The app holds a cut and an agent and nothing else of the run: each key picks another cut (a
stop of ``LogTimeline``), ``build_view`` projects the log cut there (a ``Screen``: the
content, not Textual's screen), and the panels (``arena.step.widgets.Lines``) redraw from it.
Stepping a live replay (``arena.step.live``), a key whose stop is not in the log yet asks the
replay's process to run to the next step of that kind, reads the log up to the version it
reports and moves there: the screen is still a projection of the log, never of the runner.
The ask runs off the event loop, so a slow or hung plugin never freezes the screen (q still
quits, ending the replay's process).

Textual supplies what a hand-written key loop lacked: a layout that fits 80×24 and grows with
the terminal, scrolling panels (mouse wheel included), key bindings with a footer, and
``App.run_test`` to drive it in tests."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static

from arena.step import panels
from arena.step.live import LiveError, LiveRun, LogTail
from arena.step.timeline import LogTimeline
from arena.step.view import Screen, build_view
from arena.step.widgets import HelpScreen, Lines
from ledger.errors import LedgerError

VIEWS_KEPT = 64
WARM_EVERY = 0.002
"""Seconds between slices of the timeline's warm-up (a key that comes in between is handled
first)."""
WARM_SLICE = 1_000
"""Events folded by a slice of warm-up (a page of the log: about 10 ms, ``arena bench
step``)."""
WARM_AFTER = 0.25
"""Seconds without a move before the warm-up goes on."""
FOLD_AT_ONCE = 20_000
"""Events a move may fold before it draws: about 90 ms at the 4.5 µs an event costs read,
link-checked and folded (``arena bench step``). A farther jump before the warm-up has laid
its checkpoints (up to the 200,000 events between a log's snapshots) folds ``FOLD_SLICE``
events between keys instead, the header counting down, so the screen never freezes."""
FOLD_SLICE = 5_000


class StepApp(App[None]):
    """The view of one agent at one cut, with keys to move either."""

    TITLE = "arena step"
    CSS = """
    #header { height: 2; text-wrap: nowrap; text-overflow: ellipsis; }
    Lines { scrollbar-gutter: stable; scrollbar-size-vertical: 1; }
    #board { scrollbar-gutter: auto; }
    Horizontal { height: 1fr; }
    Horizontal > * { border: round $primary; border-title-color: $text; }
    Horizontal > * { width: 1fr; }
    #transcript { display: none; }
    Screen.transcript #markets { display: none; }
    Screen.transcript #transcript { display: block; }
    #ask { dock: bottom; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # short words, so that every key shown fits the footer of an 80-column terminal
        Binding("n", "agent_decision", "next"),
        Binding("d,space", "decision", "any"),
        Binding("r", "resolution", "resolve"),
        Binding("e,G", "end", "end"),
        Binding("p,b", "step_back", "back"),
        Binding("g", "first", "first", show=False),
        Binding("w", "ask('week')", "week"),
        Binding("a", "agent(1)", "agent"),
        Binding("A", "agent(-1)", "prev agent", show=False),
        Binding("t", "transcript", "prompt"),
        Binding("slash", "ask('search')", "find"),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
        # Textual asks for ctrl+q instead; in a terminal program ctrl+c ends it (a live
        # replay quit so is resumable, as with q)
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]
    ENABLE_COMMAND_PALETTE = False  # its commands are Textual's (themes, screenshots), not ours

    def __init__(
        self,
        timeline: LogTimeline,
        agents: list[str],
        agent: str,
        live: tuple[LiveRun, LogTail] | None = None,
    ) -> None:
        super().__init__()
        self.timeline = timeline
        self.agents = agents
        self.agent = agent
        self.live = live
        self.running = False  # the live replay is working on a step
        self.status = ""  # what the live replay is doing, or why it stopped
        self.history: list[int] = []
        self.search = ""
        self.asking = ""
        self.pending: tuple[int, bool] | None = None  # a far move folding between keys
        if live is not None:
            first = len(timeline.events)  # where the replay stands: nothing decided yet
        else:
            first = timeline.next_stop(0, "decision", agent) if timeline.decisions.get(agent) else 0
        self.cut = first
        self._moved = 0.0  # when the view last moved (time.monotonic)
        self._views: dict[tuple[int, str], Screen] = {}  # the last VIEWS_KEPT, oldest first
        self.view: Screen = self.project(first, agent)

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal():
            yield Lines(id="markets")
            yield Lines(id="transcript")
            yield Lines(id="decision")
        with Horizontal():
            yield Lines(id="portfolio")
            yield Lines(id="board")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        # after the first layout, when the panels know their widths: a text wrapped before
        # then would first be drawn empty
        self.call_after_refresh(self.redraw)
        self._warming = self.set_interval(WARM_EVERY, self.warm)
        gc.freeze()

    def warm(self) -> None:
        """A slice of the timeline's warm-up (its checkpoints, so stepping back anywhere is
        quick) while nobody presses keys: a key waits for at most the slice under way. Stops
        when all are laid down, or when the log turns out damaged (said once; the view stays
        where it is)."""
        if self.pending is not None:
            self.fold_pending()
            return
        if time.monotonic() - self._moved < WARM_AFTER:
            return  # a person is pressing keys: theirs come first
        try:
            more = self.timeline.warm(WARM_SLICE)
        except LedgerError as exc:
            self.notify(panels.damaged(exc, "the warm-up stopped there"), severity="error",
                        timeout=30)  # fmt: skip
            more = False
        # what the slice kept is already out of the full collections' way: every fold of
        # the timeline ends in gc.freeze (ledger.rebuild.cycle_collector_paused(keep=True))
        if not more:
            self._warming.pause()  # resumed by a far move

    def fold_pending(self) -> None:
        """A slice of the fold to a far move's cut; drawn there once it arrives. Keys pressed
        meanwhile act on the cut still shown, and a new move replaces this one."""
        assert self.pending is not None
        cut, remember = self.pending
        try:
            arrived = self.timeline.fold_towards(cut, FOLD_SLICE)
        except LedgerError as exc:
            self.pending = None
            self.notify(str(exc), severity="error", timeout=30)
            self.redraw_header()
            return
        if arrived:
            self.move(cut, remember)
        else:
            self.redraw_header()

    # -- drawing --------------------------------------------------------------------------------

    def move(self, cut: int, remember: bool = True) -> None:
        """Show the view at ``cut``; a log that fails its checks there (or does not fold) is
        said in one line and the view stays where it was. A cut farther than ``FOLD_AT_ONCE``
        events from any state at hand is folded to between keys first (``fold_pending``)."""
        if (cut, self.agent) not in self._views and self.timeline.distance(cut) > FOLD_AT_ONCE:
            self.pending = (cut, remember)
            self._moved = time.monotonic()
            self._warming.resume()
            self.redraw_header()
            return
        self.pending = None
        try:
            view = self.project(cut, self.agent)
        except LedgerError as exc:
            self.notify(panels.damaged(exc, "the view stays where it was"), severity="error",
                        timeout=30)  # fmt: skip
            return
        self._moved = time.monotonic()
        if remember and cut != self.cut:
            self.history.append(self.cut)
        self.cut, self.view = cut, view
        for note in self.timeline.notes:
            self.notify(f"{note}; folded the log instead (run 'arena verify')", severity="warning")
        self.timeline.notes.clear()
        self.redraw()

    def project(self, cut: int, agent: str) -> Screen:
        """The view of ``agent`` at ``cut``, kept for the next VIEWS_KEPT moves: a cut's view
        never changes (the log before it is fixed), so stepping back or switching agents
        to and fro costs no fold. A live replay's new events clear them (the view counts the
        events read so far, and the stop at the old end becomes a decision's)."""
        key = (cut, agent)
        view = self._views.pop(key, None)
        if view is None:
            # the standings are every agent's: another agent's view at this cut has them
            other = next((v for (c, _), v in self._views.items() if c == cut), None)
            standings = other.standings if other is not None else None
            view = build_view(self.timeline, cut, agent, standings)
        self._views[key] = view
        if len(self._views) > VIEWS_KEPT:
            del self._views[next(iter(self._views))]
        return view

    def redraw_header(self) -> None:
        header = panels.header(self.view, self.live_status(), self.moving())
        self.query_one("#header", Static).update(header, layout=False)  # its height is fixed

    def redraw(self) -> None:
        view = self.view
        self.redraw_header()
        markets = self.query_one("#markets", Lines)
        rows = view.markets
        needle = self.search.lower()
        shown = [
            k for k in range(len(rows))
            if needle in rows.ids[k].lower() or needle in rows.question(k).lower()
        ] if needle else range(len(rows))  # fmt: skip
        id_width = panels.id_width(rows)
        # a line per market, and one per outcome under a multi-outcome market
        lines = [(k, o) for k in shown for o in (None, *rows.outcome_lines(k))]
        markets.show_sized(
            len(lines), lambda w: panels.market_line(None, id_width, None, w, rows.common_start),
            lambda k, w: panels.market_line(rows[lines[k][0]], id_width, lines[k][1], w,
                                            rows.common_start),
        )  # fmt: skip
        markets.titled(panels.markets_title(rows, len(shown), self.search))
        decision = self.query_one("#decision", Lines)
        decision.titled(f"{view.agent}'s decision")
        said = panels.decision(view)
        if self.search:
            said.highlight_words([self.search], style="reverse", case_sensitive=False)
        decision.show_text(said)
        portfolio = self.query_one("#portfolio", Lines)
        portfolio.titled(f"{view.agent}'s portfolio now")  # whole in half of 80 columns
        # laid out for the panel's width at this redraw (before the first layout: 80 columns')
        width = portfolio.content_region.width or panels.PORTFOLIO_WIDTH
        portfolio.show(None, *panels.portfolio(view, width))
        board = self.query_one("#board", Lines)
        board.show_fitted(lambda width: panels.leaderboard(view, width))
        board.titled("leaderboard (Brier, n resolved)")
        transcript = self.query_one("#transcript", Lines)
        transcript.titled("prompt · answer · model calls")
        text = panels.transcript(view)
        if self.search:
            text.highlight_words([self.search], style="reverse", case_sensitive=False)
        transcript.show_text(text)

    # -- keys ----------------------------------------------------------------------------------

    def action_agent_decision(self) -> None:
        self.go("decision", self.agent)

    def action_decision(self) -> None:
        self.go("decision")

    def action_resolution(self) -> None:
        self.go("resolution")

    def action_end(self) -> None:
        self.go("close")

    # -- live stepping -------------------------------------------------------------------------

    def go(self, kind: str, agent: str | None = None) -> None:
        """To the next stop of ``kind`` (and ``agent``) in the log read so far; past its end,
        a live replay is first run to the next step of that kind ("close": to its end)."""

        def find() -> int | None:
            found = self.timeline.following(self.cut, kind, agent) if kind != "close" else None
            return found.cut if found is not None else None

        self.reach(find, kind)

    def reach(
        self, find: Callable[[], int | None], kind: str, missing: Callable[[], str] | None = None
    ) -> None:
        """To the cut ``find`` names in the log read so far; when it names none, a live replay
        is run a step of ``kind`` at a time until it does (or the replay ends, when
        ``missing`` says what was not found, once the log of the whole run is read), else the
        end."""
        cut = find()
        if cut is not None:
            self.move(cut)
        elif self.live is None or self.live[0].closed or self.status.startswith("stopped"):
            self.move(len(self.timeline.events))
        elif self.running:
            self.notify("the replay is still running this step; q quits", severity="warning")
        else:
            self.running = True
            self.redraw()
            self.run_worker(self._advance(find, kind, missing), group="live", exclusive=True)

    async def _advance(
        self, find: Callable[[], int | None], kind: str, missing: Callable[[], str] | None
    ) -> None:
        """Ask the replay for steps until one brings the stop wanted (an agent that sat the
        cohort out never decides: its next decision is the end), reading the log after each."""
        assert self.live is not None
        run, tail = self.live
        cut: int | None = None
        try:
            while cut is None and not run.closed:
                step = await asyncio.to_thread(run.advance, kind)
                events = await asyncio.to_thread(tail.read, step.version)
                self.timeline.extend(events)
                self._views.clear()
                cut = find()
        except LiveError as exc:
            self.status = f"stopped: {exc}"
            self.notify(str(exc), severity="error", timeout=30)
        finally:
            self.running = False
        if cut is None and run.closed and missing is not None:
            self.notify(missing(), severity="warning")
        self.move(cut if cut is not None else len(self.timeline.events))

    def moving(self) -> str:
        """A far move under way, for the header: where to and how much is left to fold."""
        if self.pending is None:
            return ""
        cut = self.pending[0]
        return (
            f"to event {cut:,}: folding, {self.timeline.distance(cut):,} events to go (keys work)"
        )

    def live_status(self) -> str:
        """The replay's state for the header: running, where it stands, finished or stopped."""
        if self.live is None:
            return ""
        run = self.live[0]
        if self.status:
            return self.status
        if self.running:
            return "replay running…"
        return "replay done" if run.closed else "live"

    async def action_quit(self) -> None:
        """Quit; a live replay in the middle of a step is ended there (the steps before it are
        in the log, and 'arena replay' resumes it)."""
        if self.live is not None and self.running:
            self.live[0].kill()
        self.exit()

    def show_match(self, again: bool) -> None:
        """Bring the search's first match (``again``: the next one, from the top after the
        last) into the decision panel and, when shown, the transcript, which can run to
        thousands of lines; the markets panel is filtered by it instead. Found nowhere, it
        is said."""
        panels_searched = ["decision"] + ["transcript"] * self.screen.has_class("transcript")
        found = self.query_one("#markets", Lines).count > 0  # filtered by the search
        for name in panels_searched:
            panel = self.query_one(f"#{name}", Lines)
            row = panel.find(self.search, panel.scroll_offset.y if again else -1)
            if row is None and again:
                row = panel.find(self.search)
            if row is not None:
                panel.scroll_to(y=row, animate=False, immediate=True)
                found = True
        if not found:
            self.notify(f"no {self.search!r} in the markets, the decision or the transcript",
                        severity="warning")  # fmt: skip

    def action_first(self) -> None:
        self.move(self.timeline.first_stop())

    def action_step_back(self) -> None:
        """Back to the cut shown before the last move; with none, to the previous stop."""
        cut = self.history.pop() if self.history else self.timeline.previous_stop(self.cut)
        self.move(cut, remember=False)

    def action_agent(self, step: int) -> None:
        self.agent = self.agents[(self.agents.index(self.agent) + step) % len(self.agents)]
        self.move(self.cut, remember=False)

    def action_transcript(self) -> None:
        self.screen.toggle_class("transcript")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_ask(self, what: str) -> None:
        """A one-line prompt at the bottom for a week number or a search; Esc cancels."""
        if self.query("#ask"):
            return
        self.asking = what
        hint = "week number, Enter to go" if what == "week" else "search (empty clears), Enter"
        ask = Input(id="ask", placeholder=hint)
        self.mount(ask)
        ask.focus()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.query("#ask"):
            self.query_one("#ask").remove()
            event.stop()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.input.remove()
        value = message.value.strip()
        if self.asking == "search":
            again = bool(value) and value == self.search
            self.search = value
            self.redraw()
            if value:
                self.call_after_refresh(self.show_match, again)
            return
        if not value.isdigit():
            said = f"no week {value!r}: a week is a number ({self.weeks_there_are()})"
            self.notify(said, severity="warning")
            return
        week = int(value)
        cut = self.timeline.week_stop(week, self.agent)
        weeks = self.decision_weeks()
        if cut is None and (
            self.live is None or self.live[0].closed or week <= (weeks[-1] if weeks else 0)
        ):
            self.notify(f"no decision in week {week}: {self.weeks_there_are()}", severity="warning")
            return
        # live, a later week is run to: each decision instant until one in that week
        ran = f"no decision in week {week}: the replay ran to its end"
        self.reach(
            lambda: self.timeline.week_stop(week, self.agent), "decision",
            lambda: f"{ran}; {self.weeks_there_are()}",
        )  # fmt: skip

    def decision_weeks(self) -> list[int]:
        """The weeks with a decision in the log read so far, in order."""
        return sorted({s.week for s in self.timeline.stops if s.kind == "decision"})

    def weeks_there_are(self) -> str:
        """Which weeks ``w`` can go to, for a week it cannot ("no decision in week 50" left
        the valid ones to guess): the first and last with a decision, so far while a live
        replay goes on."""
        weeks = self.decision_weeks()
        so_far = " so far" if self.live is not None and not self.live[0].closed else ""
        if not weeks:
            return "the log has no decision yet" if so_far else "the log has no decision"
        span = f"week {weeks[0]}" if len(weeks) == 1 else f"weeks {weeks[0]}–{weeks[-1]}"
        return f"the decisions{so_far} are in {span}"
