"""Polymarket's taker fee, by market and by date, exact at the money boundary.

A ``FeeSchedule`` is a dated table: for a market (its fee category, and the market's own fee facts
where an import recorded them) at an instant it resolves a ``FeeRule``. An execution model then
asks the rule for the fee on each level a fill walks: ``rule.taker_fee(shares, price, side)``
returns a ``Fee``, with the amount rounded the venue's way, its currency, and the rule's name
and rate for the fill record. Three schedules: ``FeeSchedule.polymarket()`` (the built-in table,
``--fees auto``, data in ``ledger/fee_schedule.toml``), ``FeeSchedule.none()`` (``--fees
none``) and ``FeeSchedule.from_file(path)`` (a TOML or JSON table of the same shape).
``schedule_hash()`` names the table a run used.

**Arithmetic.** Exact rationals (``fractions.Fraction``) inside, with one rounding to a ``Decimal``
at the end. A fee is a product of up to four decimals. When a buy is sized in dollars there is
also a quotient (shares = dollars / price), and no fixed decimal precision holds that quotient.
A 28-digit ``Decimal`` makes $100 at 0.30 with rate 0.072 come to 5.0399999…, which the venue's
floor turns into 5.03999 instead of 5.04. A ``Fraction`` keeps the true value, so the single
rounding is applied to the true value. The result is a ``Decimal`` because that is how the venue
states a fee (5 dp) and how a fill record can carry it exactly (msgspec writes it as a string).
Integer micro-units would need a different unit per regime (4, 5 or 6 decimals) and would still
need the exact product first. Inputs may be ``Decimal``, ``Fraction``, ``int``, ``str`` or
``float``. A float is read as the shortest decimal that gives it back (0.3 is 0.3, not
0.299999…), which is the decimal a venue quoted.

**The timeline** (each change dated from Polymarket's changelog; see the TOML file):

* before 2026-01-05: the V1 exchange's ``rate × min(p, 1−p) × C``, worth that much collateral,
  paid in shares on a buy (÷ p) and in collateral on a sell, floored on chain to 1e-6. Every
  order signed rate 0, so the fee was 0.
* from 2026-01-05: 15-minute crypto markets (5-minute ones from 02-12, crypto markets created
  after 03-06) charged ``C × 0.25 × (p(1−p))²``. That is a number of shares on a buy and of
  dollars on a sell ("same fee units, different dollar impact"), rounded to 4 dp. Its dollar
  worth on a buy is ``C·p·0.25·(p(1−p))²``. NCAAB and Serie A markets charged
  ``C × 0.0175 × p(1−p)`` from 02-18. Which markets charged is a per-market fact, so without it
  these categories fail closed.
* from 2026-03-30: the category rates (crypto 0.07, sports 0.03, finance/politics/mentions/tech
  0.04, economics/culture/weather/other 0.05, geopolitics 0), still taken from proceeds.
* from 2026-04-28 11:00 UTC (CLOB V2): ``C × rate × p × (1−p)`` in collateral, 5 dp.
* from 2026-07-11: sports 0.05, with sports rebates cut from 25% to 15%.

**What the sources leave open, and what was chosen.**

* *Rounding mode.* The fees page says "rounded to 5 decimal places … anything smaller rounds to
  zero", and NautilusTrader's live parser says "floored". Both describe a floor, so the table says
  ``down``. NautilusTrader's backtest model and resolvedkit round to nearest instead. A fee file
  can choose ``half_even``.
* *Rates and currency from 03-30 to the 04-28 cutover.* The table assumes the rates listed later.
  It assumes 5 dp because the page that lists those rates says 5 dp. It assumes proceeds because
  the V1 exchange took fees from proceeds.
* *The 07-10 sports change* says "at midnight UTC" on a post dated 07-10. The table reads that
  as the midnight after the post, 07-11 00:00.
* *Maker rebates* are paid daily from a pool. ``maker_rebate`` is the usual per-fill
  approximation: the rebate share of the fee the fill would have paid as a taker. A rebate the
  sources do not give (February sports) is left unknown.

**Per-market facts** (``FeeFacts``: Gamma ``feesEnabled`` / ``feeSchedule``, CLOB ``fd``)
override the category table, but only in a period that honours facts, and only when they were
fetched in that same period. Facts fetched in November describe November's fees, not February's.
Fees disabled means a zero fee. A rate given by the facts replaces the table's rate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast

import msgspec

from ledger.errors import LedgerError

Side = Literal["buy", "sell"]
Currency = Literal["usdc", "shares"]
"""``usdc``: the exchange's collateral (USDC.e, pUSD since CLOB V2, 1:1 with USDC)."""
Formula = Literal["min", "curve"]
Charged = Literal["proceeds", "collateral"]
Rounding = Literal["down", "half_even", "half_up"]
Number = Decimal | Fraction | int | float | str

CATEGORIES = (
    "crypto",
    "sports",
    "finance",
    "politics",
    "mentions",
    "tech",
    "economics",
    "culture",
    "weather",
    "other",
    "geopolitics",
)
"""Polymarket's fee categories (changelog, 2026-03-30), the names a fee table may use."""

_ALIASES = {
    "other / general": "other",
    "general": "other",
    "geopolitical": "geopolitics",
    "economy": "economics",
    "technology": "tech",
    "cryptocurrency": "crypto",
}
_FORMAT = 1
_FORMULAS = ("min", "curve")
_CHARGED = ("proceeds", "collateral")
_ROUNDINGS = ("down", "half_even", "half_up")
_PERIOD_KEYS = frozenset(
    {"name", "from", "until", "formula", "charged", "places", "rounding", "market_facts"}
    | {"source", "categories"}
)
_ENTRY_KEYS = frozenset({"rate", "exponent", "rebate", "only_enabled"})


class FeeTableError(LedgerError):
    """A fee table (or a market's fee facts) that cannot be used, said in one line that names the
    file and the entry."""


class UnknownFee(LedgerError):
    """No fee is known for this market at this instant: the order fails closed. ``reason`` is
    the text a broker records on the rejection."""

    @property
    def reason(self) -> str:
        return str(self)


class Fee(msgspec.Struct, frozen=True, kw_only=True):
    """The fee on one fill (or one level of a fill).

    ``amount`` is exact and already rounded the rule's way. ``currency`` says how it is paid:
    ``usdc`` is collateral (added to a buy's cost, taken from a sell's proceeds); ``shares`` are
    taken from the shares a buy receives (the taker pays for all of them and keeps
    ``shares − amount``). ``rule``, ``rate`` and ``exponent`` identify the rule for the record.
    From ``FeeRule.maker_rebate`` the amount is money received, not paid.
    """

    amount: Decimal
    currency: Currency
    rule: str
    rate: Decimal
    exponent: int = 1


class CategoryRate(msgspec.Struct, frozen=True, kw_only=True):
    """One category's rate in one period; ``rebate`` None is not known."""

    rate: Decimal
    exponent: int = 1
    rebate: Decimal | None = None
    only_enabled: bool = False


class Period(msgspec.Struct, frozen=True, kw_only=True):
    """One row of a fee table: the UTC seconds ``[start, end)`` (None: unbounded) and how fees
    were computed and charged then."""

    name: str
    start: int | None
    end: int | None
    formula: Formula = "curve"
    charged: Charged = "collateral"
    places: int = 5
    rounding: Rounding = "down"
    market_facts: bool = True
    categories: tuple[tuple[str, CategoryRate], ...] = ()
    source: str = ""

    def covers(self, at: int) -> bool:
        return (self.start is None or self.start <= at) and (self.end is None or at < self.end)

    def entry(self, category: str) -> CategoryRate | None:
        for name, rate in self.categories:
            if name == category:
                return rate
        return None

    def uniform(self) -> CategoryRate | None:
        """The one rate every category of ``CATEGORIES`` had in this period, if they all had
        the same (before 2026, 0 everywhere): then a market's category does not matter."""
        rates = {name: rate for name, rate in self.categories}
        if set(rates) != set(CATEGORIES):
            return None
        first = next(iter(rates.values()))
        return first if all(rate == first for rate in rates.values()) else None


class FeeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a market's own data said about its fees, fetched at ``as_of`` (UTC seconds).

    None means "not said". ``from_api`` reads the real shapes.
    """

    as_of: int
    fees_enabled: bool | None = None
    rate: Decimal | None = None
    exponent: int | None = None
    taker_only: bool | None = None
    rebate_rate: Decimal | None = None

    @classmethod
    def from_api(cls, obj: Mapping[str, Any], as_of: int) -> FeeFacts | None:
        """The fee facts in a raw market object, or None when it carries none.

        The shapes it reads:

        * Gamma ``feesEnabled``, plus ``feeSchedule{rate, exponent, takerOnly, rebateRate}``;
        * the market WebSocket's ``fees_enabled``, plus
          ``fee_schedule{rate, exponent, taker_only, rebate_rate}``, with string values;
        * CLOB ``/clob-markets`` ``fd{r, e, to}``, which is preferred where both are present
          (the V2 migration guide makes it the source).

        ``taker_base_fee`` / ``takerBaseFee`` / ``tbf`` and ``/fee-rate``'s ``base_fee`` are
        ignored. In V2 they are a ceiling or a builder fee, not the rate (1000 for every
        fee-bearing market: py-clob-client-v2 #107). Before 2026 the exchange charged 0 whatever
        a market listed.
        """
        enabled = _first(obj, "feesEnabled", "fees_enabled")
        schedule = _first(obj, "fd", "feeSchedule", "fee_schedule")
        if enabled is None and schedule is None:
            return None
        where = "fee facts"
        if enabled is not None and not isinstance(enabled, bool):
            raise FeeTableError(f"{where}: feesEnabled is {enabled!r}, not true or false")
        if isinstance(schedule, str):  # Gamma encodes some objects as JSON text
            with contextlib.suppress(json.JSONDecodeError):
                schedule = json.loads(schedule, parse_float=Decimal)
        if schedule is not None and not isinstance(schedule, Mapping):
            raise FeeTableError(f"{where}: fee schedule is {schedule!r}, not an object")
        schedule = schedule or {}
        rate = _first(schedule, "r", "rate")
        exponent = _first(schedule, "e", "exponent")
        taker_only = _first(schedule, "to", "takerOnly", "taker_only")
        rebate = _first(schedule, "rebateRate", "rebate_rate")
        return cls(
            as_of=as_of,
            fees_enabled=enabled,
            rate=None if rate is None else _rate(rate, f"{where}: rate", upper=1),
            exponent=None if exponent is None else _exponent(exponent, f"{where}: exponent"),
            taker_only=None if taker_only is None else _bool(taker_only, f"{where}: takerOnly"),
            rebate_rate=None if rebate is None else _rate(rebate, f"{where}: rebate", 1),
        )


class FeeRule(msgspec.Struct, frozen=True, kw_only=True):
    """How one market's fee is computed at one instant. ``source`` says whether it came from the
    category table, the market's own facts, or ``--fees none``."""

    name: str
    category: str | None
    source: Literal["table", "market", "none"]
    rate: Decimal
    exponent: int = 1
    formula: Formula = "curve"
    charged: Charged = "collateral"
    places: int = 5
    rounding: Rounding = "down"
    rebate_rate: Decimal | None = None
    taker_only: bool = True

    def currency(self, side: Side) -> Currency:
        """What a taker pays the fee in: shares only on a buy when fees come out of proceeds."""
        return "shares" if self.charged == "proceeds" and side == "buy" else "usdc"

    def per_share(self, price: Number, side: Side) -> Fraction:
        """The exact fee per share, before rounding, in ``currency(side)``. Use it to size an
        order so that amount + fee stays within cash: rounded ``down``, the fee on ``shares`` is
        never more than ``per_share × shares``."""
        p = _price(price)
        rate = _exact(self.rate)
        if rate == 0:
            return Fraction(0)
        if self.formula == "min":
            worth = rate * min(p, 1 - p)
            if self.currency(side) == "shares":
                return worth / p if p else Fraction(0)
            return worth
        return rate * (p * (1 - p)) ** self.exponent

    def taker_fee(self, shares: Number, price: Number, side: Side) -> Fee:
        """The fee a taker pays on ``shares`` at ``price``, rounded once, as the venue does."""
        exact = self.per_share(price, side) * _shares(shares)
        return self._fee(_round(exact, self.places, self.rounding), self.currency(side))

    def maker_rebate(self, shares: Number, price: Number) -> Fee:
        """What a resting order filled for ``shares`` at ``price`` would earn, in collateral.
        This is ``rebate_rate`` × the fee the same fill would have paid as a taker sell. Arena's
        orders are takers; this is for a maker model. Fails closed where the rebate is not known.
        """
        if self.rebate_rate is None:
            raise UnknownFee(f"unknown maker rebate: {self.name}, category {self.category!r}")
        base = self.per_share(price, "sell") * _shares(shares)
        amount = _round(base * _exact(self.rebate_rate), self.places, self.rounding)
        return self._fee(amount, "usdc")

    def _fee(self, amount: Decimal, currency: Currency) -> Fee:
        return Fee(
            amount=amount, currency=currency, rule=self.name, rate=self.rate, exponent=self.exponent
        )


class FeeSchedule(msgspec.Struct, frozen=True, kw_only=True):
    """A dated table of fee rules. It is immutable, and ``schedule_hash()`` names it."""

    name: str
    periods: tuple[Period, ...] = ()
    free: bool = False

    @classmethod
    def polymarket(cls) -> FeeSchedule:
        """The built-in table, ``--fees auto``: ``ledger/fee_schedule.toml``."""
        return _builtin()

    @classmethod
    def none(cls) -> FeeSchedule:
        """``--fees none``: every fill free, whatever the market (the report should say so)."""
        return cls(name="none", free=True)

    @classmethod
    def from_option(cls, value: str) -> FeeSchedule:
        """The schedule ``--fees auto|none|FILE`` names."""
        if value == "auto":
            return cls.polymarket()
        if value == "none":
            return cls.none()
        return cls.from_file(value)

    @classmethod
    def from_file(cls, path: str | Path) -> FeeSchedule:
        """A table from a ``.toml`` or ``.json`` file. Anything wrong with it is a
        ``FeeTableError`` of one line naming the file and the entry."""
        path = Path(path)
        origin = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise FeeTableError(f"{origin}: cannot read it: {_line(exc)}") from exc
        suffix = path.suffix.lower()
        try:
            if suffix == ".toml":
                data: Any = tomllib.loads(text, parse_float=Decimal)
            elif suffix == ".json":
                data = json.loads(text, parse_float=Decimal)
            else:
                raise FeeTableError(f"{origin}: a fee table is a .toml or .json file")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise FeeTableError(f"{origin}: not valid {suffix[1:].upper()}: {_line(exc)}") from exc
        if not isinstance(data, Mapping):
            raise FeeTableError(f"{origin}: the table is not an object")
        return cls.from_mapping(data, origin)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], origin: str = "fee table") -> FeeSchedule:
        """A table from already-parsed data (the shape of ``ledger/fee_schedule.toml``)."""
        unknown = sorted(set(data) - {"format", "name", "period"})
        if unknown:
            raise FeeTableError(f"{origin}: unknown key {unknown[0]!r}")
        fmt = data.get("format", _FORMAT)
        if fmt != _FORMAT or isinstance(fmt, bool):
            raise FeeTableError(f"{origin}: format {fmt!r} is not {_FORMAT}")
        name = data.get("name", "custom")
        if not isinstance(name, str) or not name:
            raise FeeTableError(f"{origin}: name {name!r} is not a text")
        raw = data.get("period")
        if not isinstance(raw, list) or not raw:
            raise FeeTableError(f"{origin}: no [[period]] entries")
        periods: list[Period] = []
        for i, item in enumerate(raw, start=1):
            where = f"{origin}: period {i}"
            if not isinstance(item, Mapping):
                raise FeeTableError(f"{where}: not a table")
            label = item.get("name")
            if not isinstance(label, str) or not label:
                raise FeeTableError(f"{where}: no name")
            periods.append(_period(item, f"{where} ({label!r})", first=i == 1, last=i == len(raw)))
        for i in range(1, len(periods)):
            before, after = periods[i - 1], periods[i]
            assert before.end is not None and after.start is not None  # checked by _period
            where = f"{origin}: period {i + 1} ({after.name!r})"
            if after.start < before.end:
                raise FeeTableError(
                    f"{where}: starts {_when(after.start)}, before period {i} ({before.name!r}) "
                    f"ends {_when(before.end)}: the periods overlap"
                )
            if after.start > before.end:
                raise FeeTableError(
                    f"{where}: starts {_when(after.start)}, but period {i} ({before.name!r}) "
                    f"ends {_when(before.end)}: the dates between are missing"
                )
        return cls(name=name, periods=tuple(periods))

    def period_at(self, at: int) -> Period | None:
        """The period covering the instant ``at`` (UTC seconds), or None."""
        for period in self.periods:
            if period.covers(at):
                return period
        return None

    def rule_for(self, category: str | None, at: int, facts: FeeFacts | None = None) -> FeeRule:
        """The fee rule for a market of ``category`` (a name in ``CATEGORIES``, see
        ``fee_category``) at ``at`` (UTC seconds), given the market's ``facts`` if known.
        Raises ``UnknownFee`` (fail closed) when the table cannot say."""
        if self.free:
            return FeeRule(name="none", category=category, source="none", rate=Decimal(0))
        period = self.period_at(at)
        if period is None:
            raise UnknownFee(
                f"unknown fee: the fee table {self.name!r} has no period on {_day(at)}"
            )
        key = _category_key(category)
        entry = period.entry(key) if key is not None else None
        if facts is not None and not (period.market_facts and period.covers(facts.as_of)):
            facts = None  # facts describe the period they were fetched in, and no other
        if facts is not None:
            if facts.fees_enabled is False:
                off = CategoryRate(rate=Decimal(0), rebate=Decimal(0))
                return self._rule(period, key, "market", off)
            if facts.rate is not None:
                fallback = entry or CategoryRate(rate=Decimal(0))
                given = CategoryRate(
                    rate=facts.rate,
                    exponent=facts.exponent or fallback.exponent,
                    rebate=facts.rebate_rate if facts.rebate_rate is not None else fallback.rebate,
                )
                return self._rule(period, key, "market", given, facts.taker_only)
        if entry is None and key is None:
            entry = period.uniform()  # no category known, and none needed
        if entry is None:
            what = "no fee category" if category is None else f"category {category!r}"
            raise UnknownFee(f"unknown fee: {what} on {_day(at)}")
        if entry.only_enabled and not (facts is not None and facts.fees_enabled):
            raise UnknownFee(
                f"unknown fee: category {key!r} on {_day(at)} charged only markets that enabled "
                "fees, and this market's fee facts from then are not known"
            )
        return self._rule(period, key, "table", entry)

    @staticmethod
    def _rule(
        period: Period,
        category: str | None,
        source: Literal["table", "market"],
        entry: CategoryRate,
        taker_only: bool | None = None,
    ) -> FeeRule:
        return FeeRule(
            name=period.name,
            category=category,
            source=source,
            rate=entry.rate,
            exponent=entry.exponent,
            formula=period.formula,
            charged=period.charged,
            places=period.places,
            rounding=period.rounding,
            rebate_rate=entry.rebate,
            taker_only=True if taker_only is None else taker_only,
        )

    def canonical(self) -> bytes:
        """The table as canonical JSON: only what decides a fee, with ``source`` texts,
        comments, layout and the order of categories left out."""
        body = {
            "format": _FORMAT,
            "name": self.name,
            "free": self.free,
            "periods": [
                {
                    "name": p.name,
                    "from": p.start,
                    "until": p.end,
                    "formula": p.formula,
                    "charged": p.charged,
                    "places": p.places,
                    "rounding": p.rounding,
                    "market_facts": p.market_facts,
                    "categories": {
                        name: {
                            "rate": _plain(e.rate),
                            "exponent": e.exponent,
                            "rebate": None if e.rebate is None else _plain(e.rebate),
                            "only_enabled": e.only_enabled,
                        }
                        for name, e in p.categories
                    },
                }
                for p in self.periods
            ],
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    def table(self) -> dict[str, Any]:
        """The table in the shape ``from_mapping`` reads (a fee file's shape, as JSON): what a
        cohort's opening records of a user's table, so its fills can be derived again from the
        log alone. Read back, it is the same schedule (the same ``schedule_hash``)."""
        periods = []
        for p in self.periods:
            period: dict[str, Any] = {
                "name": p.name, "formula": p.formula, "charged": p.charged, "places": p.places,
                "rounding": p.rounding, "market_facts": p.market_facts,
                "categories": {name: _entry_table(e) for name, e in p.categories},
            }  # fmt: skip
            if p.start is not None:
                period["from"] = _when(p.start)
            if p.end is not None:
                period["until"] = _when(p.end)
            periods.append(period)
        return {"format": _FORMAT, "name": self.name, "period": periods}

    def schedule_hash(self) -> str:
        """sha256 (hex) of ``canonical()``: the same for the same fees, however the file was
        written."""
        return hashlib.sha256(self.canonical()).hexdigest()


def fee_category(category: str | None, tags: Sequence[str] = ()) -> str | None:
    """The fee category a market's labels name: the first of its ``category`` and ``tags`` that is
    one of ``CATEGORIES`` (case aside, with a few spellings such as "Other / General"), or None.
    A None result fails closed in ``rule_for``. A caller that wants "other" for unlabelled
    markets must say so."""
    for label in (category, *tags):
        key = _category_key(label)
        if key in CATEGORIES:
            return key
    return None


@cache
def _builtin() -> FeeSchedule:
    text = resources.files("ledger").joinpath("fee_schedule.toml").read_text(encoding="utf-8")
    return FeeSchedule.from_mapping(
        tomllib.loads(text, parse_float=Decimal), "ledger/fee_schedule.toml"
    )


def _period(item: Mapping[str, Any], where: str, first: bool, last: bool) -> Period:
    unknown = sorted(set(item) - _PERIOD_KEYS)
    if unknown:
        raise FeeTableError(f"{where}: unknown key {unknown[0]!r}")
    start = None if item.get("from") is None else _instant(item["from"], f"{where}: 'from'")
    end = None if item.get("until") is None else _instant(item["until"], f"{where}: 'until'")
    if start is None and not first:
        raise FeeTableError(f"{where}: no 'from' (only the first period may leave it out)")
    if end is None and not last:
        raise FeeTableError(f"{where}: no 'until' (only the last period may leave it out)")
    if start is not None and end is not None and start >= end:
        raise FeeTableError(f"{where}: ends {_when(end)}, not after it starts {_when(start)}")
    formula = _choice(item, "formula", _FORMULAS, "curve", where)
    charged = _choice(item, "charged", _CHARGED, "collateral", where)
    rounding = _choice(item, "rounding", _ROUNDINGS, "down", where)
    places = item.get("places", 5)
    if not isinstance(places, int) or isinstance(places, bool) or not 0 <= places <= 18:
        raise FeeTableError(f"{where}: places {places!r} is not a whole number from 0 to 18")
    market_facts = _bool(item.get("market_facts", True), f"{where}: market_facts")
    source = item.get("source", "")
    if not isinstance(source, str):
        raise FeeTableError(f"{where}: source {source!r} is not a text")
    raw = item.get("categories", {})
    if not isinstance(raw, Mapping):
        raise FeeTableError(f"{where}: categories is not a table")
    entries: dict[str, CategoryRate] = {}
    for label, value in raw.items():
        if label not in CATEGORIES:
            raise FeeTableError(
                f"{where}: unknown category {label!r} (known: {', '.join(CATEGORIES)})"
            )
        entries[label] = _entry(value, f"{where}: category {label!r}")
    return Period(
        name=str(item["name"]),
        start=start,
        end=end,
        formula=cast(Formula, formula),
        charged=cast(Charged, charged),
        places=places,
        rounding=cast(Rounding, rounding),
        market_facts=market_facts,
        categories=tuple(sorted(entries.items())),
        source=source,
    )


def _entry(value: Any, where: str) -> CategoryRate:
    if not isinstance(value, Mapping):
        return CategoryRate(rate=_rate(value, f"{where}: rate", upper=1))
    unknown = sorted(set(value) - _ENTRY_KEYS)
    if unknown:
        raise FeeTableError(f"{where}: unknown key {unknown[0]!r}")
    if "rate" not in value:
        raise FeeTableError(f"{where}: no rate")
    rebate = value.get("rebate")
    return CategoryRate(
        rate=_rate(value["rate"], f"{where}: rate", upper=1),
        exponent=_exponent(value.get("exponent", 1), f"{where}: exponent"),
        rebate=None if rebate is None else _rate(rebate, f"{where}: rebate", upper=1),
        only_enabled=_bool(value.get("only_enabled", False), f"{where}: only_enabled"),
    )


def _entry_table(entry: CategoryRate) -> dict[str, Any]:
    """One category's rate as a fee file writes it (exact decimals as text)."""
    out: dict[str, Any] = {"rate": _plain(entry.rate), "exponent": entry.exponent,
                           "only_enabled": entry.only_enabled}  # fmt: skip
    if entry.rebate is not None:
        out["rebate"] = _plain(entry.rebate)
    return out


def _choice(
    item: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str, where: str
) -> str:
    value = item.get(key, default)
    if value not in allowed:
        raise FeeTableError(f"{where}: {key} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _rate(value: Any, where: str, upper: int) -> Decimal:
    """A rate read exactly: a number (or numeric text) in [0, upper]."""
    if isinstance(value, bool):
        raise FeeTableError(f"{where} {value!r} is not a number")
    try:
        number = _decimal(value)
    except (ValueError, TypeError, InvalidOperation):
        raise FeeTableError(f"{where} {value!r} is not a number") from None
    if not number.is_finite():
        raise FeeTableError(f"{where} {value!r} is not a finite number")
    if number < 0:
        raise FeeTableError(f"{where} {_plain(number)} is negative")
    if number > upper:
        raise FeeTableError(f"{where} {_plain(number)} is over {upper}")
    return number


def _exponent(value: Any, where: str) -> int:
    if not isinstance(value, bool):
        try:
            number = _decimal(value)
        except (ValueError, TypeError, InvalidOperation):
            number = Decimal("NaN")
        if number.is_finite() and number == number.to_integral_value() and 1 <= number <= 8:
            return int(number)
    raise FeeTableError(f"{where} {value!r} is not a whole number from 1 to 8")


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise FeeTableError(f"{where} {value!r} is not true or false")
    return value


def _instant(value: Any, where: str) -> int:
    """UTC seconds from a TOML date or datetime, or an ISO-8601 text: a date is 00:00 UTC, a
    datetime needs an offset."""
    when: datetime
    if isinstance(value, str):
        try:
            parsed: date = (
                date.fromisoformat(value) if len(value) == 10 else datetime.fromisoformat(value)
            )
        except ValueError:
            raise FeeTableError(f"{where} {value!r} is not a date or a datetime") from None
        value = parsed
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise FeeTableError(f"{where} {value.isoformat()!r} has no UTC offset")
        when = value
    elif isinstance(value, date):
        when = datetime(value.year, value.month, value.day, tzinfo=UTC)
    else:
        raise FeeTableError(f"{where} {value!r} is not a date or a datetime")
    if when.microsecond:
        raise FeeTableError(f"{where} {when.isoformat()!r} is not a whole second")
    return int(when.timestamp())


def _day(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


def _when(ts: int) -> str:
    moment = datetime.fromtimestamp(ts, UTC)
    if moment.hour == moment.minute == moment.second == 0:
        return moment.date().isoformat()
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _first(obj: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if obj.get(key) is not None:
            return obj[key]
    return None


def _category_key(label: str | None) -> str | None:
    if label is None:
        return None
    key = " ".join(label.split()).casefold()
    return _ALIASES.get(key, key)


def _decimal(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, int | str):
        return Decimal(value)
    raise TypeError(type(value).__name__)


def _exact(value: Number) -> Fraction:
    """An input number as an exact rational (a float as its shortest decimal)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError("a fee input is a number, not a bool")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a fee input must be finite, not {value!r}")
        return Fraction(Decimal(repr(value)))
    number = value if isinstance(value, Decimal) else Decimal(value)
    if not number.is_finite():
        raise ValueError(f"a fee input must be finite, not {value!r}")
    return Fraction(number)


def _price(price: Number) -> Fraction:
    p = _exact(price)
    if not 0 <= p <= 1:
        raise ValueError(f"price {price!r} is outside [0, 1]")
    return p


def _shares(shares: Number) -> Fraction:
    c = _exact(shares)
    if c < 0:
        raise ValueError(f"shares {shares!r} are negative")
    return c


def _round(x: Fraction, places: int, rounding: Rounding) -> Decimal:
    """``x`` (≥ 0) to ``places`` decimals, exactly, by ``rounding``."""
    scaled = x * 10**places
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if (rounding == "half_up" and twice >= scaled.denominator) or (
        rounding == "half_even"
        and (twice > scaled.denominator or (twice == scaled.denominator and q % 2))
    ):
        q += 1
    return Decimal(f"{q}E-{places}")


def _plain(value: Decimal) -> str:
    """A decimal's canonical text: no exponent, no trailing zeros (0.070 → "0.07")."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
