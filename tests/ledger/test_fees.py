"""Polymarket's taker fee (ledger.fees) against numbers worked out by hand, each with its source.

Every expectation is an exact ``Decimal``: the module rounds once, from an exact rational, so
there is nothing to approximate. Instants are UTC seconds.
"""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError
from ledger.fees import (
    CATEGORIES,
    Fee,
    FeeFacts,
    FeeRule,
    FeeSchedule,
    FeeTableError,
    UnknownFee,
    fee_category,
)

BUILTIN = Path(__file__).resolve().parents[2] / "ledger" / "fee_schedule.toml"
BUILTIN_HASH = "67e78f9efbde62eee177949f50e11ea5968a14f3c67397950eee84e311336d4b"


def at(*parts: int) -> int:
    """UTC seconds of a date (and time)."""
    return int(datetime(*parts, tzinfo=UTC).timestamp())


SEP_28 = at(2026, 9, 28)  # the day of the bundled BTC 15-minute books
FEB_1 = at(2026, 2, 1)


def v2(rate: str, rounding: str = "down") -> FeeRule:
    """A CLOB V2 rule at ``rate`` (collateral, 5 dp), as a market's fee facts would give."""
    return FeeRule(
        name="test", category=None, source="market", rate=Decimal(rate), rounding=rounding
    )


def enabled(when: int) -> FeeFacts:
    """A market's facts, fetched at ``when``, saying only that its fees were enabled."""
    return FeeFacts(as_of=when, fees_enabled=True)


# --- golden vectors ------------------------------------------------------------------------


def test_crypto_at_rate_0_07_charges_1_75_at_half_and_0_63_at_a_tenth() -> None:
    # resolvedkit tests/test_core.py @36b4ad1 (from docs.polymarket.com/trading/fees):
    # 100 × 0.07 × 0.50 × 0.50 = 1.75; 100 × 0.07 × 0.10 × 0.90 = 0.63.
    rule = FeeSchedule.polymarket().rule_for("crypto", SEP_28)
    assert rule.taker_fee(100, "0.50", "buy") == Fee(
        amount=Decimal("1.75"),
        currency="usdc",
        rule="polymarket-v2-2026-07",
        rate=Decimal("0.07"),
    )
    assert rule.taker_fee(100, "0.10", "buy").amount == Decimal("0.63")
    assert rule.taker_fee(100, "0.10", "sell").amount == Decimal("0.63")


def test_rate_0_05_charges_1_25_on_100_shares_at_half() -> None:
    # nautilus_trader crates/adapters/polymarket/src/models.rs @2613b42: 100 × 0.05 × 0.25 = 1.25.
    schedule = FeeSchedule.polymarket()
    for category in ("culture", "economics", "weather", "other", "sports"):
        assert schedule.rule_for(category, SEP_28).taker_fee(100, "0.5", "buy").amount == Decimal(
            "1.25"
        )


def test_100_dollars_at_0_30_with_rate_0_072_is_5_04_exactly() -> None:
    # py-clob-client-v2 tests/test_fee_calculations.py @7e94379 (TestProductionFeeRatesV2):
    # (100 / 0.3) × 0.072 × 0.3 × 0.7 = 100 × 0.072 × 0.7 = 5.04. The shares are a quotient that
    # no decimal holds: passed as a Fraction, the floor sees exactly 5.04.
    shares = Fraction(100) / Fraction("0.3")
    assert v2("0.072").taker_fee(shares, "0.3", "buy").amount == Decimal("5.04")
    # What 28 significant digits would have done: 5.0399999…, floored to 5.03999.
    assert v2("0.072").taker_fee(Decimal(100) / Decimal("0.3"), "0.3", "buy").amount == Decimal(
        "5.03999"
    )


@pytest.mark.parametrize(
    ("price", "expected"),
    [
        ("0.5", ("1.5", "2.0", "2.5", "3.6")),
        ("0.3", ("2.1", "2.8", "3.5", "5.04")),
        ("0.7", ("0.9", "1.2", "1.5", "2.16")),
    ],
)
def test_100_dollars_at_each_v2_rate_matches_the_official_client(
    price: str, expected: tuple[str, ...]
) -> None:
    # py-clob-client-v2 tests/test_fee_calculations.py @7e94379: $100 × rate × (1 − p).
    shares = Fraction(100) / Fraction(price)
    for rate, want in zip(("0.03", "0.04", "0.05", "0.072"), expected, strict=True):
        assert v2(rate).taker_fee(shares, price, "buy").amount == Decimal(want)


def test_the_january_2026_rule_at_0_3_is_1_1025_shares_on_a_buy_and_dollars_on_a_sell() -> None:
    # docs.polymarket.com maker-rebates-program (Jan 2026): 100 shares at $0.30 pay 1.10 tokens
    # on a buy (worth $0.33) and $1.10 on a sell; py-clob-client-v2 tests/test_fee_calculations.py
    # gives the unrounded 100 × 0.25 × (0.3 × 0.7)² = 25 × 0.0441 = 1.1025 (4 dp: exact).
    rule = FeeSchedule.polymarket().rule_for("crypto", FEB_1, enabled(FEB_1))
    buy = rule.taker_fee(100, "0.3", "buy")
    assert (buy.amount, buy.currency, buy.rule) == (
        Decimal("1.1025"),
        "shares",
        "polymarket-2026-01",
    )
    assert (buy.rate, buy.exponent) == (Decimal("0.25"), 2)
    assert buy.amount * Decimal("0.3") == Decimal("0.33075")  # C·p·0.25·(p(1−p))², in dollars
    sell = rule.taker_fee(100, "0.3", "sell")
    assert (sell.amount, sell.currency) == (Decimal("1.1025"), "usdc")


@pytest.mark.parametrize(
    ("price", "exact", "rounded"),
    [
        ("0.5", "1.5625", "1.5625"),
        ("0.1", "0.2025", "0.2025"),
        ("0.05", "0.05640625", "0.0564"),
        ("0.01", "0.00245025", "0.0024"),
        ("0.99", "0.00245025", "0.0024"),
    ],
)
def test_the_january_2026_rule_rounds_down_to_4_places(
    price: str, exact: str, rounded: str
) -> None:
    # Exact values: py-clob-client-v2 tests/test_fee_calculations.py (TestPlatformFee).
    # "Fees are rounded to 4 decimal places … anything smaller rounds to zero": maker-rebates page.
    rule = FeeSchedule.polymarket().rule_for("crypto", FEB_1, enabled(FEB_1))
    assert rule.per_share(price, "buy") * 100 == Fraction(exact)
    assert rule.taker_fee(100, price, "buy").amount == Decimal(rounded)


def test_a_live_v2_fill_of_25_at_0_13_pays_0_14137() -> None:
    # py-clob-client-v2 #107 (2026-08-04): BUY 25 @0.13 on fd{r: 0.05}; all 25 shares arrived and
    # the balance fell 3.39 = 3.25 + 0.14. Exact: 25 × 0.05 × 0.13 × 0.87 = 0.141375.
    facts = FeeFacts.from_api({"fd": {"r": 0.05, "e": 1, "to": True}}, as_of=at(2026, 8, 4))
    rule = FeeSchedule.polymarket().rule_for("other", at(2026, 8, 4), facts)
    fee = rule.taker_fee(25, "0.13", "buy")
    assert (fee.amount, fee.currency) == (Decimal("0.14137"), "usdc")
    assert v2("0.05", rounding="half_even").taker_fee(25, "0.13", "buy").amount == Decimal(
        "0.14138"
    )


def test_a_fee_under_the_smallest_unit_rounds_to_zero() -> None:
    # nautilus_trader models.rs @2613b42 rounds 0.02 × 0.05 × 0.01 × 0.99 = 0.0000099 to 0.00001
    # (round to nearest); the fees page says "anything smaller rounds to zero" and Nautilus' live
    # parser floors: the table floors, so it is 0 (half_even gives Nautilus' number).
    assert v2("0.05").taker_fee("0.02", "0.01", "buy").amount == 0
    assert v2("0.05").taker_fee("0.01", "0.01", "buy").amount == 0
    assert v2("0.05", rounding="half_even").taker_fee("0.02", "0.01", "buy").amount == Decimal(
        "0.00001"
    )


def test_a_maker_earns_the_rebate_share_of_the_fee() -> None:
    # nautilus_trader models.rs @2613b42: rate 0.07, rebate 0.20, 100 @0.50 → 1.75 × 0.20 = 0.35.
    rule = FeeSchedule.polymarket().rule_for("crypto", SEP_28)
    assert rule.rebate_rate == Decimal("0.20")
    assert rule.maker_rebate(100, "0.5").amount == Decimal("0.35")
    sports = FeeSchedule.polymarket().rule_for("sports", at(2026, 3, 1), enabled(at(2026, 3, 1)))
    with pytest.raises(UnknownFee, match="unknown maker rebate"):
        sports.maker_rebate(100, "0.5")  # February sports rebates: no source gives them


def test_the_v1_exchange_charged_min_p_in_shares_on_buys_and_collateral_on_sells() -> None:
    # ctf-exchange docs/Overview.md @2745c30 (base rate 0.02): BUY 100 @0.50 → 2 tokens ($1),
    # BUY 100 @0.90 → 0.222 tokens ($0.20); SELL 100 @0.10 → $0.20. CalculatorHelper.sol floors
    # in 1e-6 units: 0.02 × 0.1 × 100 / 0.9 = 0.2222…→ 0.222222.
    table = {
        "period": [
            {"name": "v1", "formula": "min", "charged": "proceeds", "places": 6,
             "categories": {"politics": 0.02}},
        ]
    }  # fmt: skip
    rule = FeeSchedule.from_mapping(table).rule_for("politics", at(2024, 11, 1))
    assert rule.taker_fee(100, "0.50", "buy") == Fee(
        amount=Decimal(2), currency="shares", rule="v1", rate=Decimal("0.02")
    )
    assert rule.taker_fee(100, "0.90", "buy").amount == Decimal("0.222222")
    assert rule.taker_fee(100, "0.10", "sell") == Fee(
        amount=Decimal("0.2"), currency="usdc", rule="v1", rate=Decimal("0.02")
    )


def test_a_float_is_read_as_the_decimal_it_prints_as() -> None:
    rule = v2("0.07")
    assert rule.taker_fee(100.0, 0.1, "buy") == rule.taker_fee(100, "0.1", "buy")
    assert rule.per_share(0.3, "buy") == Fraction("0.07") * Fraction("0.3") * Fraction("0.7")


def test_bad_fee_inputs_are_refused() -> None:
    rule = v2("0.07")
    for shares, price in ((-1, "0.5"), (1, "1.01"), (1, "-0.1"), (1, float("nan"))):
        with pytest.raises(ValueError):
            rule.taker_fee(shares, price, "buy")


def test_a_fee_encodes_for_the_fill_record_with_its_amount_as_exact_text() -> None:
    fee = FeeSchedule.polymarket().rule_for("crypto", SEP_28).taker_fee(25, "0.13", "buy")
    record = json.loads(msgspec.json.encode(fee))
    assert record == {
        "amount": "0.19792",  # 25 × 0.07 × 0.13 × 0.87 = 0.197925, floored
        "currency": "usdc",
        "rule": "polymarket-v2-2026-07",
        "rate": "0.07",
        "exponent": 1,
    }


# --- the dates each rule changed ------------------------------------------------------------


def rule_at(category: str, when: int) -> FeeRule:
    return FeeSchedule.polymarket().rule_for(category, when, enabled(when))


def test_fees_start_on_2026_01_05_for_crypto_and_not_the_day_before() -> None:
    # docs changelog, Jan 5 2026: taker fees enabled on 15-minute crypto markets.
    before = rule_at("crypto", at(2026, 1, 4, 23, 59, 59))
    assert (before.name, before.taker_fee(100, "0.5", "buy").amount) == ("polymarket-v1", 0)
    day_of = rule_at("crypto", at(2026, 1, 5))
    assert day_of.name == "polymarket-2026-01"
    assert day_of.taker_fee(100, "0.5", "buy").amount == Decimal("1.5625")


def test_sports_fees_start_on_2026_02_18() -> None:
    # docs changelog, Feb 11 2026: NCAAB and Serie A fees from February 18; rate 0.0175 per
    # predtools.com/learn/polymarket-clob-fees: 100 × 0.0175 × 0.25 = 0.4375.
    assert rule_at("sports", at(2026, 2, 17)).taker_fee(100, "0.5", "buy").amount == 0
    day_of = rule_at("sports", at(2026, 2, 18))
    assert day_of.taker_fee(100, "0.5", "buy").amount == Decimal("0.4375")


def test_category_rates_start_on_2026_03_30() -> None:
    # docs changelog, Mar 30 2026, "Fee Structure V2": fees on most categories; politics 0.04:
    # 100 × 0.04 × 0.25 = 1 (paid in shares: the V1 exchange still took fees from proceeds).
    assert rule_at("politics", at(2026, 3, 29)).taker_fee(100, "0.5", "buy").amount == 0
    fee = rule_at("politics", at(2026, 3, 30)).taker_fee(100, "0.5", "buy")
    assert (fee.amount, fee.currency) == (Decimal(1), "shares")


def test_clob_v2_charges_collateral_from_2026_04_28_at_11_utc() -> None:
    # docs changelog, Apr 17/28 2026: CLOB V2 live at ~11:00 UTC; fees charged in pUSD.
    for when in (at(2026, 4, 27), at(2026, 4, 28, 10, 59, 59)):
        rule = rule_at("crypto", when)
        assert (rule.name, rule.currency("buy")) == ("polymarket-2026-03", "shares")
    rule = rule_at("crypto", at(2026, 4, 28, 12))
    assert (rule.name, rule.currency("buy")) == ("polymarket-v2", "usdc")
    assert rule.taker_fee(100, "0.5", "buy").amount == Decimal("1.75")


def test_sports_go_from_0_03_to_0_05_on_2026_07_11() -> None:
    # docs changelog, Jul 10 2026: "increases from 0.03 to 0.05 at midnight UTC" (the midnight
    # after the post); the sports rebate falls from 25% to 15%.
    before = rule_at("sports", at(2026, 7, 10, 23, 59, 59))
    assert (before.rate, before.rebate_rate) == (Decimal("0.03"), Decimal("0.25"))
    assert before.taker_fee(100, "0.5", "buy").amount == Decimal("0.75")
    day_of = rule_at("sports", at(2026, 7, 11))
    assert (day_of.rate, day_of.rebate_rate) == (Decimal("0.05"), Decimal("0.15"))
    assert day_of.taker_fee(100, "0.5", "buy").amount == Decimal("1.25")


def test_geopolitics_is_free_in_every_period() -> None:
    schedule = FeeSchedule.polymarket()
    for period in schedule.periods:
        when = period.start if period.start is not None else at(2024, 1, 1)
        fee = schedule.rule_for("geopolitics", when).taker_fee(1000, "0.5", "buy")
        assert fee.amount == 0


# --- failing closed -------------------------------------------------------------------------


def test_an_unknown_category_is_an_unknown_fee_with_a_reason_a_broker_can_record() -> None:
    schedule = FeeSchedule.polymarket()
    with pytest.raises(UnknownFee) as caught:
        schedule.rule_for("x", at(2026, 5, 1))
    assert caught.value.reason == "unknown fee: category 'x' on 2026-05-01"
    assert isinstance(caught.value, LedgerError)
    with pytest.raises(UnknownFee, match=r"^unknown fee: no fee category on 2026-05-01$"):
        schedule.rule_for(None, at(2026, 5, 1))


def test_crypto_in_early_2026_needs_the_markets_facts() -> None:
    # Only 15- and 5-minute crypto markets (and new ones from Mar 6) charged: a category cannot say.
    schedule = FeeSchedule.polymarket()
    with pytest.raises(UnknownFee, match="charged only markets that enabled fees"):
        schedule.rule_for("crypto", FEB_1)
    off = FeeFacts(as_of=FEB_1, fees_enabled=False)
    assert schedule.rule_for("crypto", FEB_1, off).taker_fee(100, "0.5", "buy").amount == 0


def test_a_table_with_no_period_at_an_instant_fails_closed() -> None:
    table = {"period": [{"name": "late", "from": "2026-05-01", "categories": {"crypto": 0.07}}]}
    with pytest.raises(UnknownFee, match="has no period on 2026-04-30"):
        FeeSchedule.from_mapping(table).rule_for("crypto", at(2026, 4, 30))


# --- a market's own fee facts ---------------------------------------------------------------


def test_facts_from_each_api_shape() -> None:
    when = SEP_28
    # docs.polymarket.com/api-reference/markets/get-clob-market-info, its example "fd".
    assert FeeFacts.from_api({"fd": {"r": 0.02, "e": 2, "to": True}}, when) == FeeFacts(
        as_of=when, rate=Decimal("0.02"), exponent=2, taker_only=True
    )
    # Gamma market: feesEnabled and feeSchedule{rate, exponent, takerOnly, rebateRate}.
    gamma = {
        "feesEnabled": True,
        "feeSchedule": {"rate": 0.04, "exponent": 1, "takerOnly": True, "rebateRate": 0.25},
    }
    assert FeeFacts.from_api(gamma, when) == FeeFacts(
        as_of=when,
        fees_enabled=True,
        rate=Decimal("0.04"),
        exponent=1,
        taker_only=True,
        rebate_rate=Decimal("0.25"),
    )
    # The market WebSocket: snake case, numbers as text.
    socket = {
        "fees_enabled": True,
        "fee_schedule": {"exponent": "1", "rate": "0.07", "taker_only": True, "rebate_rate": "0.2"},
    }
    facts = FeeFacts.from_api(socket, when)
    assert facts is not None and (facts.rate, facts.rebate_rate) == (
        Decimal("0.07"),
        Decimal("0.2"),
    )
    # A 2024 Gamma market (api_fixtures/gamma/statground_raw): fees off; base fees are not rates.
    old = {"feesEnabled": False, "takerBaseFee": 0, "makerBaseFee": 0, "fee": "20000000000000000"}
    assert FeeFacts.from_api(old, when) == FeeFacts(as_of=when, fees_enabled=False)
    assert FeeFacts.from_api({"taker_base_fee": 200, "maker_base_fee": 0}, when) is None


def test_facts_with_a_bad_value_are_one_line_errors() -> None:
    with pytest.raises(FeeTableError, match=r"^fee facts: rate -0\.07 is negative$"):
        FeeFacts.from_api({"fd": {"r": -0.07}}, SEP_28)
    with pytest.raises(FeeTableError, match="exponent"):
        FeeFacts.from_api({"fd": {"r": 0.07, "e": 1.5}}, SEP_28)


def test_facts_override_the_category_table() -> None:
    schedule = FeeSchedule.polymarket()
    off = FeeFacts(as_of=SEP_28, fees_enabled=False)
    rule = schedule.rule_for("crypto", SEP_28, off)
    assert (rule.source, rule.taker_fee(100, "0.5", "buy").amount) == ("market", 0)
    own = FeeFacts(as_of=SEP_28, rate=Decimal("0.072"))
    rule = schedule.rule_for("crypto", SEP_28, own)
    assert (rule.source, rule.rate, rule.rebate_rate) == (
        "market",
        Decimal("0.072"),
        Decimal("0.20"),
    )
    # Facts name a rate where the table knows no category: the facts are enough.
    assert schedule.rule_for("us-current-affairs", SEP_28, own).rate == Decimal("0.072")


def test_facts_fetched_in_another_period_are_not_used() -> None:
    # A sports market fetched in September (fees off, or rate 0.05) says nothing about May.
    schedule = FeeSchedule.polymarket()
    may = at(2026, 5, 15)
    off = FeeFacts(as_of=SEP_28, fees_enabled=False)
    rule = schedule.rule_for("sports", may, off)
    assert (rule.source, rule.rate) == ("table", Decimal("0.03"))
    # Nor are facts used before 2026, when the exchange charged nothing whatever a market listed.
    pre = at(2025, 6, 1)
    listed = FeeFacts(as_of=pre, fees_enabled=True, rate=Decimal("0.02"))
    assert schedule.rule_for("sports", pre, listed).rate == 0


# --- schedules: none, files, hashes ---------------------------------------------------------


def test_none_charges_nothing_whatever_the_market() -> None:
    schedule = FeeSchedule.none()
    for category in ("crypto", "x", None):
        fee = schedule.rule_for(category, SEP_28).taker_fee(100, "0.5", "buy")
        assert (fee.amount, fee.rule) == (0, "none")
    assert schedule.schedule_hash() != FeeSchedule.polymarket().schedule_hash()


def test_the_built_in_table_is_pinned_by_its_hash() -> None:
    # A change to ledger/fee_schedule.toml changes which fees a run charged: update this on purpose.
    assert FeeSchedule.polymarket().schedule_hash() == BUILTIN_HASH
    assert FeeSchedule.from_option("auto") is FeeSchedule.polymarket()
    assert FeeSchedule.from_option("none") == FeeSchedule.none()


def test_the_built_in_table_covers_every_category_without_gaps() -> None:
    periods = FeeSchedule.polymarket().periods
    assert periods[0].start is None and periods[-1].end is None
    for period in periods:
        assert [name for name, _ in period.categories] == sorted(CATEGORIES)


def test_the_hash_is_the_same_however_the_table_is_written(tmp_path: Path) -> None:
    data = tomllib.loads(BUILTIN.read_text(encoding="utf-8"), parse_float=Decimal)
    as_json = tmp_path / "fees.json"
    as_json.write_text(json.dumps(data, default=str, indent=1), encoding="utf-8")
    assert FeeSchedule.from_option(str(as_json)).schedule_hash() == BUILTIN_HASH
    for period in data["period"]:  # sources, order of categories, and comments don't count
        period.pop("source")
        period["categories"] = dict(reversed(period["categories"].items()))
    data["period"][-1]["categories"]["crypto"]["rate"] = Decimal("0.0700")
    as_json.write_text(json.dumps(data, default=str), encoding="utf-8")
    assert FeeSchedule.from_file(as_json).schedule_hash() == BUILTIN_HASH
    data["period"][-1]["categories"]["crypto"]["rate"] = Decimal("0.072")
    as_json.write_text(json.dumps(data, default=str), encoding="utf-8")
    assert FeeSchedule.from_file(as_json).schedule_hash() != BUILTIN_HASH


GOOD = """
[[period]]
name = "before"
until = 2026-04-28
[period.categories]
crypto = 0.07

[[period]]
name = "after"
from = 2026-04-28
[period.categories]
crypto = { rate = 0.07, rebate = 0.2 }
"""


def refusal(tmp_path: Path, text: str, name: str = "fees.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FeeTableError) as caught:
        FeeSchedule.from_file(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


def test_a_well_formed_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "fees.toml"
    path.write_text(GOOD, encoding="utf-8")
    rule = FeeSchedule.from_file(path).rule_for("crypto", at(2026, 5, 1))
    assert (rule.name, rule.rebate_rate) == ("after", Decimal("0.2"))


def test_overlapping_periods_are_refused_in_one_line(tmp_path: Path) -> None:
    text = GOOD.replace("from = 2026-04-28", "from = 2026-04-20")
    message = refusal(tmp_path, text)
    assert message.endswith(
        "period 2 ('after'): starts 2026-04-20, before period 1 ('before') ends 2026-04-28: "
        "the periods overlap"
    )


def test_a_gap_between_periods_is_refused_in_one_line(tmp_path: Path) -> None:
    text = GOOD.replace("from = 2026-04-28", 'from = "2026-05-01T00:00:00Z"')
    message = refusal(tmp_path, text)
    assert message.endswith(
        "period 2 ('after'): starts 2026-05-01, but period 1 ('before') ends 2026-04-28: "
        "the dates between are missing"
    )


def test_an_unknown_category_is_refused_in_one_line(tmp_path: Path) -> None:
    message = refusal(tmp_path, GOOD.replace("crypto = 0.07", "cryptos = 0.07"))
    assert "period 1 ('before'): unknown category 'cryptos' (known: crypto, sports," in message


def test_a_negative_rate_is_refused_in_one_line(tmp_path: Path) -> None:
    message = refusal(tmp_path, GOOD.replace("rate = 0.07", "rate = -0.07"))
    assert message.endswith("period 2 ('after'): category 'crypto': rate -0.07 is negative")


def test_a_malformed_date_is_refused_in_one_line(tmp_path: Path) -> None:
    text = GOOD.replace("from = 2026-04-28", 'from = "2026-13-01"')
    assert refusal(tmp_path, text).endswith(
        "period 2 ('after'): 'from' '2026-13-01' is not a date or a datetime"
    )
    text = GOOD.replace("from = 2026-04-28", "from = 2026-04-28T00:00:00")
    assert refusal(tmp_path, text).endswith("has no UTC offset")


def test_other_bad_tables_are_refused_in_one_line(tmp_path: Path) -> None:
    assert "no 'until' (only the last period" in refusal(
        tmp_path, GOOD.replace("until = 2026-04-28", "")
    )
    assert "not valid TOML" in refusal(tmp_path, "[[period]\n")
    assert "not valid JSON" in refusal(tmp_path, "{", "fees.json")
    assert "a .toml or .json file" in refusal(tmp_path, "", "fees.yaml")
    assert "unknown key 'rat'" in refusal(tmp_path, GOOD.replace("rate =", "rat ="))
    assert "rounding 'up' is not one of" in refusal(
        tmp_path, GOOD.replace('name = "after"', 'name = "after"\nrounding = "up"')
    )
    with pytest.raises(FeeTableError, match="cannot read it"):
        FeeSchedule.from_file(tmp_path / "missing.toml")


def test_fee_category_reads_a_markets_labels() -> None:
    assert fee_category("Crypto") == "crypto"
    assert fee_category("Elon Musk", ("Tweet Markets", "Twitter", "Culture")) == "culture"
    assert fee_category(None, ("Mentions", "Trump", "Politics")) == "mentions"
    assert fee_category("Other / General") == "other"
    assert fee_category("US-current-affairs", ("All",)) is None


# --- invariants -----------------------------------------------------------------------------

PRICES = st.integers(0, 10_000).map(lambda k: Decimal(k).scaleb(-4))  # 0 … 1 on a 0.0001 grid
SHARES = st.integers(0, 10**9).map(lambda k: Decimal(k).scaleb(-2))  # 2 dp, up to 10 million
SIDES = st.sampled_from(("buy", "sell"))
# Every rule the built-in table can give for a p(1−p) curve, across categories and periods.
CURVE_RULES = st.sampled_from(
    [
        FeeSchedule.polymarket().rule_for(category, when, enabled(when))
        for when in (FEB_1, at(2026, 3, 1), at(2026, 4, 1), at(2026, 6, 1), SEP_28)
        for category in CATEGORIES
    ]
)


@settings(max_examples=300, deadline=None)
@given(CURVE_RULES, SHARES, PRICES, SIDES)
def test_a_curve_fee_is_nonnegative_symmetric_and_at_most_a_quarter_of_rate_times_shares(
    rule: FeeRule, shares: Decimal, price: Decimal, side: str
) -> None:
    fee = rule.taker_fee(shares, price, side)
    assert fee.amount >= 0
    assert fee == rule.taker_fee(shares, 1 - price, side)
    assert fee.amount <= rule.rate * shares / 4


@settings(max_examples=300, deadline=None)
@given(CURVE_RULES, SHARES, SHARES, PRICES, SIDES)
def test_a_fee_never_falls_as_shares_grow(
    rule: FeeRule, a: Decimal, b: Decimal, price: Decimal, side: str
) -> None:
    small, large = sorted((a, b))
    fee = rule.taker_fee
    assert fee(small, price, side).amount <= fee(large, price, side).amount


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(CATEGORIES),
    st.integers(at(2020, 1, 1), at(2026, 1, 5) - 1),
    st.integers(at(2026, 1, 5), at(2027, 1, 1)),
    SHARES,
    PRICES,
    SIDES,
)
def test_fees_are_zero_before_2026_and_always_for_geopolitics(
    category: str, early: int, late: int, shares: Decimal, price: Decimal, side: str
) -> None:
    schedule = FeeSchedule.polymarket()
    rule = schedule.rule_for(category, early, enabled(early))
    assert rule.taker_fee(shares, price, side).amount == 0
    rule = schedule.rule_for("geopolitics", late, enabled(late))
    assert rule.taker_fee(shares, price, side).amount == 0


def test_a_market_with_no_category_pays_the_rate_every_category_had() -> None:
    """Before 2026 every category paid 0, so a market nobody labelled pays 0 too; after the
    category rates began, an unlabelled market's fee is unknown and its order refused."""
    schedule = FeeSchedule.polymarket()
    before = int(datetime(2024, 9, 29, tzinfo=UTC).timestamp())
    assert schedule.rule_for(None, before).taker_fee(100, 0.5, "buy").amount == 0
    after = int(datetime(2026, 6, 1, tzinfo=UTC).timestamp())
    with pytest.raises(UnknownFee, match="no fee category on 2026-06-01"):
        schedule.rule_for(None, after)
