"""The event vocabulary of the log.

Every fact the simulator records is one of these frozen ``msgspec`` structs. They form a tagged
union (the ``type`` field names the class), so a payload decodes straight into the right type
without hand-written dispatch, and the JSON stays readable with the ``sqlite3`` shell.

Conventions shared by every event:

* ``cohort`` is the stream the event belongs to; ``ts`` is the *simulated* instant in UTC unix
  seconds (tapes are recorded at second resolution, so an integer is exact and fast).
* Money and shares are floats; the projections hold their identities to 1e-9.
* Fields that only some producers fill (the LLM bookkeeping of a decision, say) default to
  ``None`` and are omitted from the JSON when unset, which keeps the log small. Defaults are
  only ever None, empty containers, "" or small ints: msgspec omits a default by identity,
  so a float or string default would be written or not depending on where the value came
  from (a pickled argument, say), and identical runs could log different bytes.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

OrderKind = Literal["buy", "sell"]


class Event(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True, gc=False
):
    """Base of every event; never appended itself.

    ``gc=False``: events hold only values, never references back, so they cannot form cycles,
    and the million of them alive in a rebuild need not be scanned by the cycle collector.
    """

    cohort: str
    ts: int


class CohortOpened(Event, tag=True, frozen=True):
    """A cohort starts: who trades, under which rules, on which tape, with which settings."""

    start: int
    rules: str
    cash: float
    agents: list[str]
    decision_cadence: str
    mark_cadence: str
    agent_specs: dict[str, str] = {}
    universe: list[str] = []
    tape: str = ""
    seed: int = 0
    settings: dict[str, Any] = {}


class CohortClosed(Event, tag=True, frozen=True):
    """The cohort is over; ``reason`` says why (all settled, tape exhausted, ...).

    ``state_digest`` is the digest of the live projections at the close, so ``arena verify``
    can prove that folding the log again gives exactly the state the run ended with.
    """

    reason: str
    state_digest: str = ""


class DecisionsStopped(Event, tag=True, frozen=True):
    """No more decisions, though ``markets`` of the universe are still open: the tape's
    recording ends at ``ts`` (no price is known after it). Written once, only then; a cohort
    whose markets all close before its tape ends needs no such event."""

    reason: str
    markets: list[str] = []


class MarketListed(Event, tag=True, frozen=True):
    """A snapshot of a market's metadata as the cohort saw it at the start."""

    market: str
    question: str
    outcomes: list[str]
    volume: float
    category: str | None = None
    open_ts: int | None = None
    close_ts: int | None = None


class Marked(Event, tag=True, frozen=True):
    """Prices observed at an instant: ``prices[i]`` are the outcome prices of ``markets[i]``,
    in the market's outcome order (a binary market lists YES then NO)."""

    markets: list[str]
    prices: list[list[float]]
    held: dict[str, dict[str, list[float]]] | None = None
    """``--marks-at liquidation``: per agent, per market it holds, each outcome's price per share
    of what it holds if sold now down the bid book (``prices`` where it holds none); a
    position's value is its agent's price here, else ``prices``'."""


class BetIntent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A bet as the agent asked for it, before the broker has judged it."""

    market: str
    side: str
    amount: float
    belief: float | None = None


class SellIntent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A sell as asked for: by position id, or by market and side."""

    percentage: float
    position_id: str | None = None
    market: str | None = None
    side: str | None = None


class DecisionMade(Event, tag=True, frozen=True):
    """What an agent decided at a decision instant, with everything needed to audit it.

    ``action`` is BET, SELL, HOLD (or MIXED when a decision both sells and bets); an agent whose
    strategy failed gets HOLD with ``error`` set, so the failure is in the log, not lost.
    """

    agent: str
    week: int
    action: str
    reasoning: str = ""
    bets: list[BetIntent] = []
    sells: list[SellIntent] = []
    prompt: str | None = None
    raw_response: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency_ms: float | None = None
    retries: int = 0
    error: str | None = None


class OrderPlaced(Event, tag=True, frozen=True):
    """An order the broker is about to judge; a buy carries dollars, a sell a percentage."""

    agent: str
    order_id: str
    kind: OrderKind
    market: str
    side: str
    amount: float | None = None
    percentage: float | None = None
    position_id: str | None = None


class FillLeg(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One level an order took: its price, the shares taken there, the level's index in the
    book (None for a price that is no level, such as a midpoint) and the fee charged on it."""

    price: float
    shares: float
    level: int | None = None
    fee: float | None = None


class OrderFilled(Event, tag=True, frozen=True):
    """An order executed at ``price`` (the side's price at the instant, or under an execution
    model the average price of its legs).

    For a buy ``amount`` is the dollars paid and ``confidence`` the implied confidence; for a
    sell ``amount`` is the proceeds, ``cost_basis`` the share of cost that left the position and
    ``realized`` the profit on it. ``cash_before`` makes each fill checkable on its own.

    The fields after ``realized`` are set only under an execution model other than Forecaster
    Arena's rule (``fa``), so an ``fa`` fill is the same bytes it always was, its one leg the tape
    point at ``price``: ``fee`` in ``fee_currency`` (``usdc``, paid beside ``amount`` on a buy and
    out of it on a sell, or ``shares``, kept back from those bought), ``legs`` the levels taken,
    ``requested`` what was asked when less filled (dollars for a buy, shares for a sell),
    ``execution`` the model and the hash of its parameters, ``book`` the snapshot walked, and
    ``synthetic`` when the book was made from a price (a spread of ticks around it).
    """

    agent: str
    order_id: str
    kind: OrderKind
    market: str
    side: str
    position_id: str
    price: float
    shares: float
    amount: float
    cash_before: float
    confidence: float | None = None
    belief: float | None = None
    cost_basis: float | None = None
    realized: float | None = None
    fee: float | None = None
    fee_currency: str | None = None
    legs: list[FillLeg] | None = None
    requested: float | None = None
    execution: str | None = None
    book: str | None = None
    synthetic: bool | None = None


class OrderRejected(Event, tag=True, frozen=True):
    """An order the broker refused, with a reason a person can read."""

    agent: str
    order_id: str
    kind: OrderKind
    market: str
    side: str
    reason: str
    amount: float | None = None
    percentage: float | None = None


class MarketResolved(Event, tag=True, frozen=True):
    """The market settled; ``winner`` is the outcome name exactly as the tape spells it."""

    market: str
    winner: str


class MarketVoided(Event, tag=True, frozen=True):
    """The market was cancelled (a 50/50 resolution): open positions are refunded."""

    market: str


class PositionSettled(Event, tag=True, frozen=True):
    """An open position paid out $1 or $0 per share at resolution."""

    agent: str
    market: str
    side: str
    position_id: str
    shares: float
    payout: float
    cost: float
    realized: float
    won: bool


class PositionRefunded(Event, tag=True, frozen=True):
    """An open position on a voided market got its remaining cost basis back."""

    agent: str
    market: str
    side: str
    position_id: str
    shares: float
    refund: float


class ModelCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One attempt at asking a model one question, as it happened (the transcript's unit).

    ``question`` is what was asked about (``decision`` for the ``llm`` agent, the market id for
    the ``llm`` forecaster); ``reask`` counts the times that question was asked again after an
    unusable answer, and ``attempt`` the HTTP attempts of one asking (1 unless the server
    failed and the client tried again). ``request`` is the cassette key of the messages;
    ``system`` names the system prompt by its digest (its text is in ``PromptStored``), and
    ``messages`` are the others. ``status`` is the HTTP status (None when no answer came);
    ``error`` why this attempt gave no usable answer, be it the server's, the network's or the
    parser's (``rejected`` the parser's reason alone). Secrets never reach here: the client
    scrubs every text before it is stored.
    """

    model: str
    question: str
    request: str
    attempt: int = 1
    reask: int = 0
    system: str | None = None
    messages: list[dict[str, str]] = []
    structured: bool = False
    status: int | None = None
    answer: str | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency_ms: float | None = None
    error: str | None = None
    rejected: str | None = None


class ModelCalled(Event, tag=True, frozen=True):
    """One attempt of one model question of a decision, logged after the ``DecisionMade`` it
    belongs to; ``n`` numbers the decision's attempts from 1, in the order they were made."""

    agent: str
    week: int
    n: int
    call: ModelCall


class PromptStored(Event, tag=True, frozen=True):
    """A system prompt's text, logged once per cohort the first time a call uses it; calls
    refer to it by ``digest`` rather than repeating thousands of characters each week."""

    digest: str
    text: str


AnyEvent = (
    CohortOpened
    | CohortClosed
    | DecisionsStopped
    | MarketListed
    | Marked
    | DecisionMade
    | OrderPlaced
    | OrderFilled
    | OrderRejected
    | MarketResolved
    | MarketVoided
    | PositionSettled
    | PositionRefunded
    | ModelCalled
    | PromptStored
)

EVENT_TYPES: dict[str, type[Event]] = {cls.__name__: cls for cls in get_args(AnyEvent)}
"""Every type the log may hold, by its tag; derived from ``AnyEvent`` so the two cannot drift."""

ENCODER = msgspec.json.Encoder()
"""The one encoder of the log's canonical bytes; the store calls its ``encode`` directly in
the append loop, where the frame of the ``encode`` wrapper below is a tenth of the cost."""
_decoder: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)
_list_decoder: msgspec.json.Decoder[list[AnyEvent]] = msgspec.json.Decoder(list[AnyEvent])


def encode(event: Event) -> bytes:
    """The canonical JSON of an event (the bytes that are stored and hashed)."""
    return ENCODER.encode(event)


def decode(payload: bytes | str) -> AnyEvent:
    """Decode one stored payload into its event type."""
    return _decoder.decode(payload)


def decode_many(payloads: list[bytes]) -> list[AnyEvent]:
    """Decode many payloads in one call; much faster than one ``decode`` per row."""
    return _list_decoder.decode(b"[" + b",".join(payloads) + b"]")
