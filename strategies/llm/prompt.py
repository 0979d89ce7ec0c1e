"""The Forecaster Arena prompt, built from a strategy's view of one decision instant.

The cohort's rules pick the wording (methodology §1.5): v1's, or v2's, whose system prompt asks
for the value of the portfolio instead of accuracy, caps the bets of a decision together,
calls a bet's size a capital-allocation decision and scores by portfolio value (Brier only a
diagnostic), and whose user prompt names the cap ``Maximum Total BET Allocation This
Decision``. The v1 text is unchanged, byte for byte, so recordings keep their keys.

The user prompt reproduces the original layout line for line (methodology §1.5), numbers included:
the original formats with JavaScript's ``toFixed`` and ``toLocaleString("en-US")``, which round
ties away from zero where Python's ``format`` rounds them to even, so both are re-done here.

Two places knowingly differ from the v1 code, which had bugs there: a position's "Current"
price is the price of *its* side (v1 showed the YES price for NO positions and 50% for every
multi-outcome position), and the positions value counts every open position, as marks do (v1
left out positions on markets that had closed but not yet resolved).
"""

from __future__ import annotations

import functools
import json
import math
import re
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from strategies.api import MarketMeta, MarketsView, PositionView, View

SYSTEM_TEMPLATE = """\
You are an AI forecaster taking part in Forecaster Arena (v1), a paper-trading competition on \
Polymarket prediction markets. Your goal is to forecast accurately and to grow your portfolio.

Each week you see your portfolio, your open positions and the markets you can trade. Answer \
with exactly one of these JSON objects.

To place bets:
{{"action": "BET", "bets": [{{"market_id": "<market ID>", "side": "YES", "amount": 500.00}}], \
"reasoning": "<why>"}}

To sell positions:
{{"action": "SELL", "sells": [{{"position_id": "<position ID>", "percentage": 100}}], \
"reasoning": "<why>"}}

To do nothing this week:
{{"action": "HOLD", "reasoning": "<why>"}}

MARKET TYPES:
- Binary markets: "side" is "YES" or "NO".
- Multi-outcome markets: "side" is the exact name of one outcome. For example, with
  Outcomes: ["Trump","Harris"] and Prices: {{"Trump":0.55,"Harris":0.45}}, bet "side": "Harris".

RULES:
1. Every bet is at least ${min_bet:.2f}.
2. No bet is more than {max_pct:g}% of your current cash.
3. You hold at most one position per market and side; a new bet on the same side adds to it.
4. One decision may contain several bets, or several sells.
5. The size of a bet states your confidence in it.

SCORING:
- Accuracy is scored with the Brier score (lower is better).
- Your implied confidence is the bet amount divided by the largest bet you could have made: a \
bet of {max_pct:g}% of cash means 100% confidence.
- Profit and loss of the portfolio are tracked as well.

Reply with valid JSON only: no markdown, no code fences, nothing before or after the object."""

V2_WORDING = (
    ("Forecaster Arena (v1)", "Forecaster Arena (v2)"),
    (
        "Your goal is to forecast accurately and to grow your portfolio.",
        "Your goal is to maximize the value of your paper portfolio.",
    ),
    (
        "2. No bet is more than {max_pct:g}% of your current cash.",
        "2. The bets of one decision together are at most {max_pct:g}% of your current cash; "
        "if they are more, none of them is placed.",
    ),
    (
        "5. The size of a bet states your confidence in it.",
        "5. The size of a bet is a capital-allocation decision: how much of your portfolio you "
        "put on it.",
    ),
    (
        "- Accuracy is scored with the Brier score (lower is better).\n"
        "- Your implied confidence is the bet amount divided by the largest bet you could have "
        "made: a bet of {max_pct:g}% of cash means 100% confidence.\n"
        "- Profit and loss of the portfolio are tracked as well.",
        "- You are ranked by the value of your portfolio: your cash plus your open positions at "
        "their market prices.\n"
        "- The Brier score of your bets is kept as a diagnostic only; it does not rank you.",
    ),
)
"""Where Forecaster Arena's v2 instructions differ from v1's (its goal, the per-decision cap,
what a bet's size means, how it is scored): v2's template is v1's with these replaced, so the
rest of the two cannot drift apart."""


def _reworded(template: str, changes: tuple[tuple[str, str], ...]) -> str:
    """``template`` with each ``(old, new)`` replaced, each found exactly once (a change that
    no longer matches is an error at import, not a v2 prompt that silently says v1's words)."""
    for old, new in changes:
        if template.count(old) != 1:
            raise ValueError(f"the v1 instructions no longer hold {old[:40]!r} once")
        template = template.replace(old, new)
    return template


SYSTEM_TEMPLATE_V2 = _reworded(SYSTEM_TEMPLATE, V2_WORDING)

RETRY_LIMIT = 500
"""Characters of the previous answer echoed back in the retry prompt."""


def system_prompt(min_bet: float = 50.0, max_fraction: float = 0.25, version: str = "v1") -> str:
    """The fixed instructions of the rules ``version`` (v2's wording for "v2", else v1's),
    with the betting limits of the cohort's rules."""
    template = SYSTEM_TEMPLATE_V2 if version == "v2" else SYSTEM_TEMPLATE
    return template.format(min_bet=min_bet, max_pct=max_fraction * 100)


def user_prompt(
    view: View, *, initial_cash: float = 10_000.0, markets: int = 500, left_out: int = 0
) -> str:
    """What the agent sees this week: date, portfolio, positions, the top markets by volume;
    with ``left_out``, the header says that many more were left out to fit the context."""
    positions = tuple(reversed(view.positions))  # newest first: the view lists them as opened
    positions_value = sum(p.value for p in positions)
    total = view.cash + positions_value
    pnl = total - initial_cash
    pnl_pct = pnl / initial_cash * 100
    lines = [
        f"CURRENT DATE: {view.time:%Y-%m-%d}",
        f"DECISION WEEK: {view.week}",
        "",
        "YOUR PORTFOLIO:",
        f"- Cash Balance: ${fixed(view.cash, 2)}",
        _cap_line(view),
        f"- Positions Value: ${fixed(positions_value, 2)}",
        f"- Total Portfolio: ${fixed(total, 2)}",
        f"- P/L: ${fixed(pnl, 2)} ({'+' if pnl >= 0 else ''}{fixed(pnl_pct, 2)}%)",
        "",
    ]
    if positions:
        lines.append("YOUR CURRENT POSITIONS:")
        for p in positions:
            lines += _position_lines(p, view.markets)
    else:
        lines += ["YOUR CURRENT POSITIONS: None", ""]
    shown = top_markets(view.markets, markets)
    more = f"; {left_out} more not shown, to fit the model's context" if left_out else ""
    lines.append(f"AVAILABLE MARKETS (Top {len(shown)} by volume{more}):")
    for i in shown:
        lines += _market_lines(view.markets, i)
    lines.append("What is your decision? Respond with valid JSON only.")
    return "\n".join(lines)


_HEX = re.compile(r"[0-9a-fA-F]{8,}")
CHARACTERS_PER_TOKEN = 2.5
"""Of the text other than digits and hex ids: measured on SmolLM2's tokenizer, a prompt's
labels and punctuation ran 2.6 characters a token, prose 5; GPT-style tokenizers do better."""


def estimated_tokens(text: str) -> float:
    """The tokens ``text`` takes, guessed high: a token for every digit and for every character
    of a hex id (SmolLM2 splits them so: a 66-character market id is 66 tokens), and one per
    ``CHARACTERS_PER_TOKEN`` characters of the rest. Within 3% above SmolLM2's count on a
    60-market prompt."""
    found = _HEX.findall(text)
    ids = sum(len(m) for m in found)
    digits = sum(text.count(d) for d in "0123456789") - sum(
        m.count(d) for m in found for d in "0123456789"
    )
    rest = len(text) - ids - digits
    return float(ids + digits + rest / CHARACTERS_PER_TOKEN)


def fitted_markets(
    view: View, *, system: str, initial_cash: float, markets: int, room: float
) -> int:
    """How many of the top ``markets`` the prompt can show with the system prompt in ``room``
    tokens (``estimated_tokens``), markets taken whole in volume order."""
    shown = top_markets(view.markets, markets)
    base = user_prompt(view, initial_cash=initial_cash, markets=0, left_out=len(shown))
    used = estimated_tokens(system) + estimated_tokens(base)
    for n, i in enumerate(shown):
        used += estimated_tokens("\n".join(_market_lines(view.markets, i)) + "\n")
        if used > room:
            return n
    return len(shown)


def _cap_line(view: View) -> str:
    """The portfolio's line for the largest bet: v1 caps each bet, v2 the decision's total."""
    pct = f"{view.max_fraction * 100:g}%"
    if view.rules.version == "v2":
        return (
            f"- Maximum Total BET Allocation This Decision: ${fixed(view.max_bet, 2)} "
            f"({pct} of cash across all bets)"
        )
    return f"- Maximum Bet Size: ${fixed(view.max_bet, 2)} ({pct} of cash)"


def retry_prompt(original: str, error: str, previous: str) -> str:
    """The original prompt again, with why the last answer failed and what it said."""
    echoed = previous[:RETRY_LIMIT] + ("..." if len(previous) > RETRY_LIMIT else "")
    return (
        f"{original}\n\n---\n"
        f"Your previous response could not be used: {error}\n\n"
        f"Your previous response was:\n{echoed}\n\n"
        "Answer again with valid JSON only: no code fences and no text outside the JSON object."
    )


def top_markets(markets: MarketsView, n: int) -> list[int]:
    """Indices of the ``n`` tradeable markets with the most volume (universe order on ties)."""
    tradeable = np.flatnonzero(markets.open)
    order = np.argsort(-markets.volume[tradeable], kind="stable")
    return [int(i) for i in tradeable[order][:n]]


def _position_lines(p: PositionView, markets: MarketsView) -> list[str]:
    try:
        question = markets.meta(p.market).question
    except KeyError:
        question = p.market
    return [
        f"- ID: {p.id}",
        f'  Market: "{question}"',
        f"  Side: {p.side} | Shares: {fixed(p.shares, 2)}",
        f"  Entry: {fixed(p.avg_entry * 100, 1)}% | Current: {fixed(p.price * 100, 1)}%",
        f"  Value: ${fixed(p.value, 2)} | P/L: ${fixed(p.pnl, 2)}",
        "",
    ]


def _market_lines(markets: MarketsView, i: int) -> list[str]:
    meta = markets.meta_at(i)
    head, closes = _fixed_lines(meta)
    if meta.is_binary:
        yes = float(markets.yes[i])
        prices = f"  Prices: {fixed(yes * 100, 1)}% YES / {fixed((1 - yes) * 100, 1)}% NO"
    else:
        quote = markets.prices(meta.id) or ()
        shown = {
            outcome: _js_number(p)
            for outcome, p in zip(meta.outcomes, quote, strict=False)
            if 0 <= p <= 1  # NaN fails too: the original lists only valid prices
        }
        prices = f"  Prices: {_js_json(shown)}"
    volume = float(markets.volume[i])  # as of now, NaN where unknown: never the final total
    grouped = _grouped(volume) if volume and math.isfinite(volume) else "N/A"
    return [*head, prices, f"  Volume: ${grouped}", closes, ""]


@functools.lru_cache(maxsize=1 << 16)
def _grouped(volume: float) -> str:
    """``locale_number`` of a volume, which repeats from one decision to the next."""
    return locale_number(volume)


@functools.lru_cache(maxsize=1 << 16)
def _fixed_lines(meta: MarketMeta) -> tuple[tuple[str, ...], str]:
    """The lines of a market that do not change from one decision to the next, before its
    prices and the "Closes" line after them: worked out once per market, not once a week."""
    head = [
        f"- ID: {meta.id}",
        f'  Question: "{meta.question}"',
        f"  Category: {meta.category or 'General'}",
    ]
    if meta.is_binary:
        head.append("  Type: Binary (YES/NO)")
    else:
        head += ["  Type: Multi-outcome", f"  Outcomes: {_js_json(list(meta.outcomes))}"]
    closes = (  # the scheduled end: when it actually closed is not knowable yet
        "N/A" if meta.end_ts is None else f"{datetime.fromtimestamp(meta.end_ts, UTC):%Y-%m-%d}"
    )
    return tuple(head), f"  Closes: {closes}"


def fixed(x: float, digits: int) -> str:
    """JavaScript's ``x.toFixed(digits)``: the exact binary value, ties away from zero.

    Python's formatting rounds the exact binary value too, and differs only on an exact tie
    (it rounds those to even): only a value within a hair of a tie takes the slow exact path,
    which keeps a 500-market prompt within a few milliseconds."""
    if x == 0:
        x = 0.0  # JS prints -0 as "0.00"
    scaled = abs(x) * 10.0**digits
    if abs(scaled % 1.0 - 0.5) > 1e-9 * max(1.0, scaled):
        return f"{x:.{digits}f}"
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def locale_number(x: float) -> str:
    """JavaScript's ``x.toLocaleString("en-US")``: grouped, at most three decimals.

    ICU rounds the shortest decimal that prints as ``x`` (its ``repr``), not the exact binary
    value, so 1.0005 shows as 1.001 here as in a browser."""
    value = Decimal(repr(float(x))).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    text = f"{value:,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _js_number(x: float) -> int | float:
    """A price as ``JSON.stringify`` writes it: 1, not 1.0."""
    return int(x) if float(x).is_integer() else float(x)


def _js_json(value: object) -> str:
    """``JSON.stringify``: no spaces, non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
