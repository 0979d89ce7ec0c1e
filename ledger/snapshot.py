"""A cohort's folded state as readable JSON, so a read need not fold the whole log again.

A snapshot is the image of one ``CohortState`` after a given event of its stream. It is stored
in the log beside the events (``snapshots``, see :mod:`ledger.schema`), tied to that event's
global seq and chain hash, and restored by reads (``report``, ``step``, ``export``) that then
fold only the events after it. ``arena verify`` folds everything from the first event and
compares each snapshot, byte for byte, with the image of its own fold at the snapshot's
position, so a snapshot can speed a read up but never change what it says.

Why the image is shaped this way:

* **Exact.** Floats are written by msgspec's shortest round-trip repr, and every dict of the
  state is kept as a list in its insertion order (books, markets, marks, open positions, the
  pending buys of each market), so a restored state is the folded one: the same digest, the
  same report rows in the same order, the same Brier rows when a later resolution scores it.
* **Self-contained.** It holds only what the fold keeps (cash, positions, pending buys, Brier
  rows, counters, and the opening, listing and closing facts the reports show), never a list
  of events, so an event type added later cannot change what a snapshot of today means.
* **Versioned.** ``FORMAT`` names this layout. A snapshot of another format is not guessed at:
  reads fold the log instead and ``verify`` names it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgspec

from ledger.collector import collector_paused
from ledger.errors import LedgerError
from ledger.events import CohortClosed, CohortOpened, DecisionsStopped, MarketListed
from ledger.projection import Book, BrierRow, CohortState, PendingBuy, Position

FORMAT = 1
"""The layout of :class:`StateImage`; bump it (and keep reading the old one, or not) whenever
a field is added, removed or changes meaning."""


class SnapshotError(LedgerError):
    """A stored snapshot that cannot be used: damaged, of another format, or not this state."""


class BookImage(msgspec.Struct, frozen=True, kw_only=True):
    """One agent's account; ``pending_buys`` are the buys of unresolved markets, grouped by
    market in the order the markets were first bought."""

    agent: str
    cash: float
    initial_cash: float
    realized: float
    positions: list[Position]
    pending_buys: list[PendingBuy]
    brier_rows: list[BrierRow]
    counts: tuple[int, int, int, int, int]  # bets, sells, rejected, decisions, errors
    flows: dict[str, float]  # JSON objects keep their order, so these restore exactly
    bets_by_market: dict[str, int]


class StateImage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The whole ``CohortState``; pairs are ``[key, value]`` lists in insertion order."""

    format: int
    cohort: str
    opened: CohortOpened | None
    closed: CohortClosed | None
    stopped: DecisionsStopped | None
    markets: list[MarketListed]
    marks: list[tuple[str, list[float]]]
    resolutions: list[tuple[str, str | None]]
    n_orders: int
    n_positions: list[tuple[str, str, str, int]]
    books: list[BookImage]
    held: dict[str, dict[str, list[float]]] = {}  # liquidation marks only


class _Header(msgspec.Struct):
    """What is read of an image before trusting its layout."""

    format: int


_encoder = msgspec.json.Encoder()
_image_decoder = msgspec.json.Decoder(StateImage)
_header_decoder = msgspec.json.Decoder(_Header)


def encode_state(state: CohortState) -> bytes:
    """The canonical image of ``state``: equal states give equal bytes."""
    image = StateImage(
        format=FORMAT,
        cohort=state.cohort,
        opened=state.opened,
        closed=state.closed,
        stopped=state.stopped,
        markets=list(state.markets.values()),
        marks=list(state.marks.items()),
        held=state.held,
        resolutions=list(state.resolutions.items()),
        n_orders=state.n_orders,
        n_positions=[(*key, n) for key, n in state.n_positions.items()],
        books=[
            BookImage(
                agent=b.agent,
                cash=b.cash,
                initial_cash=b.initial_cash,
                realized=b.realized,
                positions=list(b.positions.values()),
                pending_buys=[buy for buys in b.buys.values() for buy in buys],
                brier_rows=b.brier_rows,
                counts=(b.n_bets, b.n_sells, b.n_rejected, b.n_decisions, b.n_errors),
                flows=b.flows,
                bets_by_market=b.bets_by_market,
            )
            for b in state.books.values()
        ],
    )
    return _encoder.encode(image)


def decode_state(data: bytes) -> CohortState:
    """The state an image describes; SnapshotError if it is not an image of this format.

    The image is decoded at once, and its header alone only when that fails, to say whether
    it is of another format: a header read first is a second pass over every byte."""
    try:
        with collector_paused():
            image = _image_decoder.decode(data)
    except msgspec.MsgspecError as exc:
        _check_format(data)
        raise SnapshotError(f"not a readable state image ({exc})") from None
    _check_format(image)
    state = CohortState(image.cohort)
    state.opened, state.closed, state.stopped = image.opened, image.closed, image.stopped
    state.markets = {m.market: m for m in image.markets}
    state.marks = dict(image.marks)
    state.held = image.held
    state.resolutions = dict(image.resolutions)
    state.n_orders = image.n_orders
    state.n_positions = {(a, m, s): n for a, m, s, n in image.n_positions}
    for b in image.books:
        buys: dict[str, list[PendingBuy]] = {}
        for buy in b.pending_buys:
            buys.setdefault(buy.market, []).append(buy)
        state.books[b.agent] = Book(
            agent=b.agent,
            cash=b.cash,
            initial_cash=b.initial_cash,
            positions={(p.market, p.side): p for p in b.positions},
            realized=b.realized,
            buys=buys,
            brier_rows=b.brier_rows,
            n_bets=b.counts[0],
            n_sells=b.counts[1],
            n_rejected=b.counts[2],
            n_decisions=b.counts[3],
            n_errors=b.counts[4],
            flows=b.flows,
            bets_by_market=b.bets_by_market,
        )
    return state


def _check_format(image: StateImage | bytes) -> None:
    """SnapshotError naming the format of an image that is not of ``FORMAT``."""
    try:
        found = (
            image.format if isinstance(image, StateImage) else _header_decoder.decode(image).format
        )
    except msgspec.MsgspecError as exc:
        raise SnapshotError(f"not a readable state image ({exc})") from None
    if found != FORMAT:
        raise SnapshotError(f"state image format {found}; this arena reads format {FORMAT}")


@dataclass(frozen=True)
class Snapshot:
    """One stored snapshot: the image of ``stream`` after its event ``version`` (global
    ``seq``, whose chain hash was ``chain_hash``), and the row's own ``hash``."""

    id: int
    stream: str
    version: int
    seq: int
    chain_hash: bytes
    closing: bool
    format: int
    state: bytes
    hash: bytes

    @property
    def name(self) -> str:
        """How errors and notes name it: the snapshot's id, cohort and log position."""
        return f"snapshot {self.id} (cohort {self.stream}, seq {self.seq})"

    def intact(self) -> bool:
        """Whether the row is whole: a write cut short or an edited image fails this."""
        return self.hash == snapshot_hash(self.chain_hash, self.format, self.state)


def snapshot_hash(chain_hash: bytes, fmt: int, state: bytes) -> bytes:
    """What a snapshot row's ``hash`` must be: it binds the image to its place in the chain.
    Hashed in parts, so a big image is not copied to be hashed."""
    digest = hashlib.sha256(chain_hash)
    digest.update(b"%d\x00" % fmt)
    digest.update(state)
    return digest.digest()
