"""The widgets of ``arena step``'s screen (Textual, the ``tui`` extra) that Textual does not have.

* ``Lines``: a scrolling panel of one-line rows under a fixed heading, each row formatted and
  drawn only when it is visible and drawn again only when it changes; every panel of the app
  is one.
* ``HelpScreen``: the keys (``HELP``), over the view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

HELP = """\
n      next decision of this agent   d, space  next decision (any agent)
r      next resolution               e, G      the end
p, b   step back                     g         the first stop
w      go to week N                  a, A      next, previous agent
t      prompt and answer panel       /         find (again: the next match)
?      this help                     q         quit
Stepping a live replay, n d r e and w run it as far as needed: agents
decide only then.
Markets: Δ is the change since this agent's previous decision; history the
last ten marks up to this instant (never later); of YES, or of the outcome
named on the line. A narrow panel shows the question instead, with … for
the words most questions begin with (its heading says which). Totals are
cash plus positions at this instant's marks.
Panels scroll with the mouse wheel. Esc closes."""


class HelpScreen(ModalScreen[None]):
    """The keys, over the view; any of Esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: auto; max-width: 100%; height: auto; border: round $accent; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help")


Sized = tuple[int, Callable[[int], Text], Callable[[int, int], Text]]
"""``Lines.show_sized``'s rows: how many, the heading for a width, the k-th row for a width."""


class Lines(ScrollView):
    """A scrolling panel of one-line rows under a fixed heading, each row formatted and drawn
    only when visible, and drawn once per change: the markets of a wide universe, an agent's
    hundreds of positions, a decision's reasoning or a prompt wrapped to the panel's width.
    Text widgets and tables lay out every row on every change (and a text whose height changes
    lays out the whole screen again), which took ten times the redraw budget on 500 markets and
    20 agents (``arena bench step``).

    The vertical scrollbar keeps its column (one cell) whether shown or not: a text wrapped to
    the panel's width before the bar appeared had the bar drawn over its last cells."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id)
        self.heading: Text | None = None
        self.count = 0
        self.line: Callable[[int], Text] = lambda k: Text()
        self.text: Text | None = None  # shown wrapped to the width, when set by show_text
        self.fitted: Callable[[int], tuple[Text, list[Text]]] | None = None  # by show_fitted
        self.sized: Sized | None = None  # by show_sized
        self._strips: dict[int, Strip] = {}  # row -> as drawn (-1: the heading)
        self._texts: dict[int, Text | None] = {}  # row -> its text as drawn (None: blank)
        self._strips_width = 0
        self._style = Style()
        self._title = ""

    def show(self, heading: Text | None, count: int, line: Callable[[int], Text]) -> None:
        self.text = self.fitted = self.sized = None
        self._show(heading, count, line)

    def show_sized(
        self, count: int, heading: Callable[[int], Text], line: Callable[[int, int], Text]
    ) -> None:
        """Rows laid out for the panel's width, each still made only when visible (the
        markets: a narrow panel gives the question the room of the history), laid out again
        when the width changes."""
        self.text = self.fitted = None
        self.sized = (count, heading, line)
        self._resize_sized()

    def _resize_sized(self) -> None:
        assert self.sized is not None
        count, heading, line = self.sized
        width = self.scrollable_content_region.width
        self._show(heading(width), count, lambda k: line(k, width))

    def show_fitted(self, rows: Callable[[int], tuple[Text, list[Text]]]) -> None:
        """A heading and rows that ``rows`` lays out for a width (the leaderboard's columns),
        laid out again when the panel's width changes. Cut rather than wrapped, they leave
        the scrollbar's column to the text unless they overflow the panel."""
        self.text, self.fitted, self.sized = None, rows, None
        self._fit()

    def _fit(self) -> None:
        assert self.fitted is not None
        width = self.content_region.width
        heading, lines = self.fitted(width)
        if len(lines) + 1 > self.scrollable_content_region.height:
            heading, lines = self.fitted(width - self.styles.scrollbar_size_vertical)
        self._show(heading, len(lines), lines.__getitem__)

    def titled(self, title: str) -> None:
        """Set the border's title; Textual draws the whole panel again on every assignment,
        so an unchanged title is not assigned."""
        if title != self._title:
            self._title = self.border_title = title

    def show_text(self, text: Text) -> None:
        """A long text, one row per line it wraps to at the panel's width."""
        self.text, self.fitted, self.sized = text, None, None
        self._wrap()

    def _show(self, heading: Text | None, count: int, line: Callable[[int], Text]) -> None:
        had_heading = self.heading is not None
        self.heading, self.count, self.line = heading, count, line
        # never less than the panel's height: a count that changes within it changes no
        # scrollbar, so it needs no new layout of the screen
        rows = max(count + (heading is not None), self.scrollable_content_region.height)
        # as wide as the rows are drawn, no wider: the panel's own width counts its scrollbar,
        # which made a horizontal scrollbar appear under every scrolling panel, over a row
        size = Size(self.scrollable_content_region.width, rows)
        if size != self.virtual_size or had_heading != (heading is not None) or not self._strips:
            self._strips, self._texts = {}, {}
            self.virtual_size = size
            self.refresh()
            return
        # The same shape: only the rows on screen whose text changed are drawn again. Drawing
        # a row (Textual's borders, padding and colours around it) was most of a key's time,
        # and a step often changes a few rows of a panel (the leaderboard's, say) or none.
        top = heading is not None
        for y in range(self.scrollable_content_region.height):
            k = -1 if top and y == 0 else self.scroll_offset.y + y - top
            text = heading if k < 0 else line(k) if k < count else None
            if k not in self._texts or self._texts[k] != text:
                self._texts[k] = text
                self._strips.pop(k, None)
                self.refresh(Region(0, y, self.size.width, 1))

    def _wrap(self) -> None:
        assert self.text is not None
        width = max(self.scrollable_content_region.width, 1)
        rows: list[Text] = list(self.text.wrap(self.app.console, width)) if self.size.width else []
        self._show(None, len(rows), rows.__getitem__)

    def on_resize(self) -> None:
        if self.text is not None:
            self._wrap()
        elif self.fitted is not None:
            self._fit()
        elif self.sized is not None:
            self._resize_sized()

    def find(self, needle: str, after: int = -1) -> int | None:
        """The first row after ``after`` that holds ``needle`` (in any case), or None."""
        needle = needle.lower()
        return next((k for k in range(after + 1, self.count)
                     if needle in self.line(k).plain.lower()), None)  # fmt: skip

    def plain(self) -> list[str]:
        """Every row as text (the heading first), for tests and search."""
        rows = [self.line(k).plain for k in range(self.count)]
        return [self.heading.plain, *rows] if self.heading is not None else rows

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._strips_width or not self._strips:
            # the panel's style walks every ancestor's CSS: once per change, not per line
            self._strips, self._strips_width, self._style = {}, width, self.rich_style
            self._texts = {}
        top = self.heading is not None
        k = -1 if top and y == 0 else self.scroll_offset.y + y - top
        strip = self._strips.get(k)
        if strip is not None:
            return strip
        if k not in self._texts:
            self._texts[k] = self.heading if k < 0 else self.line(k) if k < self.count else None
        line = self._texts[k]
        if line is None:
            strip = Strip.blank(width, self._style)
        else:
            segments = list(line.render(self.app.console))
            strip = Strip(segments).crop_extend(0, width, self._style)
        self._strips[k] = strip
        return strip
