"""Standings and the cross-cohort leaderboard (methodology §1.11, §1.12), against hand
arithmetic."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError
from ledger.events import BetIntent, CohortOpened, Marked, MarketListed, SellIntent
from ledger.intervals import mean_ci, paired_difference, t_quantile_975
from ledger.leaderboard import (
    MARKET_SKILL_MIN_REFERENCE,
    categories,
    cohort_standings,
    leaderboard,
    paired_returns,
    standings,
)
from ledger.projection import Book, BrierRow, CohortState, Ledger
from ledger.rules import Broker, rules_for, settle

T_1 = 12.706204736  # t_{0.975, 1}
T_2 = 4.302652730  # t_{0.975, 2}


class Trader:
    """Drives one cohort of a ledger: quotes are set per market as a YES price."""

    def __init__(self, ledger: Ledger, cohort: str, agents: list[str] | None = None) -> None:
        self.ledger = ledger
        self.cohort = cohort
        self.prices: dict[str, list[float]] = {}
        ledger.apply(
            CohortOpened(
                cohort=cohort,
                ts=0,
                start=0,
                rules="v1",
                cash=10_000.0,
                agents=agents or AGENTS,
                decision_cadence="weekly",
                mark_cadence="daily",
            )
        )
        for market in ("bin", "other"):
            ledger.apply(
                MarketListed(
                    cohort=cohort,
                    ts=0,
                    market=market,
                    question="?",
                    outcomes=["Yes", "No"],
                    volume=0.0,
                )
            )

    @property
    def state(self) -> CohortState:
        return self.ledger.cohorts[self.cohort]

    def yes(self, market: str, price: float) -> None:
        self.prices[market] = [price, 1.0 - price]

    def bet(self, agent: str, market: str, side: str, amount: float) -> None:
        intent = BetIntent(market=market, side=side, amount=amount)
        Broker(self.state, rules_for("v1")).execute(agent, 1, [intent], [], self.prices.get)

    def sell(self, agent: str, market: str, side: str, pct: float) -> None:
        intent = SellIntent(market=market, side=side, percentage=pct)
        Broker(self.state, rules_for("v1")).execute(agent, 1, [], [intent], self.prices.get)

    def mark(self, market: str) -> None:
        self.ledger.apply(
            Marked(cohort=self.cohort, ts=2, markets=[market], prices=[self.prices[market]])
        )


AGENTS = ["alice", "bob"]


def two_cohorts() -> Ledger:
    ledger = Ledger()
    one = Trader(ledger, "c1")
    one.yes("bin", 0.25)
    one.yes("other", 0.5)
    one.bet("alice", "bin", "YES", 500)  # 500 / 0.25 = 2000 sh; conf 500 / 2500 = 0.2; cash 9500
    one.bet("bob", "bin", "NO", 1_500)  # 1500 / 0.75 = 2000 sh; conf 1500 / 2500 = 0.6; cash 8500
    one.bet("bob", "bin", "NO", 49)  # rejected: below the minimum
    one.bet("alice", "other", "YES", 950)  # 1900 sh; conf 950 / (0.25 * 9500) = 0.4; cash 8550
    settle(one.state, "bin", 3, "Yes")  # alice +2000 (realized +1500), bob +0 (realized -1500)
    one.yes("other", 0.75)
    one.mark("other")  # alice's 1900 YES shares now worth 1900 * 0.75 = 1425 (cost 950)

    two = Trader(ledger, "c2")
    two.yes("bin", 0.5)
    two.bet("alice", "bin", "NO", 2_500)  # 5000 sh; conf 1.0; cash 7500
    two.bet("bob", "bin", "YES", 1_000)  # 2000 sh; conf 0.4; cash 9000
    two.bet("bob", "bin", "YES", 900)  # 1800 sh; conf 900 / 2250 = 0.4; cash 8100
    two.yes("bin", 0.75)
    two.sell("bob", "bin", "YES", 50)  # 1900 sh * 0.75 = 1425 back, basis 950, +475; cash 9525
    settle(two.state, "bin", 3, "No")  # alice +5000 (realized +2500); bob 1900 sh lose (-950)
    return ledger


def test_cohort_standings_by_hand() -> None:
    table = standings(two_cohorts())
    alice, bob = table["c1"]
    # alice: cash 8550 + 2000 = 10550; positions 1425; total 11975; P/L 1975 = 19.75%
    assert alice.agent == "alice"
    assert (alice.cash, alice.positions_value, alice.total_value) == (10_550.0, 1_425.0, 11_975.0)
    assert (alice.pnl, alice.return_pct) == (1_975.0, 19.75)
    # realized 2000 - 500 = 1500; unrealized 1425 - 950 = 475; together the P/L
    assert (alice.realized_pnl, alice.unrealized_pnl) == (1_500.0, 475.0)
    # one scored buy, conf 0.2, won: (0.2 - 1)^2 = 0.64; BSS 1 - 0.64 / 0.25 = -1.56
    assert alice.brier == pytest.approx(0.64)
    assert alice.bss == pytest.approx(-1.56)
    # the market said 0.25 for YES: (0.25 - 1)^2 = 0.5625; 1 - 0.64 / 0.5625 = -0.13777...
    assert alice.brier_paid == pytest.approx(0.5625)
    # one resolved bet is too few for a skill score against it (MARKET_SKILL_MIN_BETS)
    assert alice.bss_market is None
    assert (alice.n_resolved, alice.win_rate, alice.n_bets, alice.n_rejected) == (1, 1.0, 2, 0)

    # bob: cash 8500, nothing open, P/L -1500 = -15%; (0.6 - 0)^2 = 0.36, BSS 1 - 1.44 = -0.44
    # against the market's 0.75 for NO: (0.75 - 0)^2 = 0.5625, 1 - 0.36 / 0.5625 = 0.36
    assert bob.agent == "bob"
    assert (bob.total_value, bob.pnl, bob.return_pct) == (8_500.0, -1_500.0, -15.0)
    assert bob.brier == pytest.approx(0.36)
    assert bob.bss == pytest.approx(-0.44)
    assert (bob.brier_paid, bob.bss_market) == (pytest.approx(0.5625), None)
    assert (bob.n_resolved, bob.win_rate, bob.n_bets, bob.n_rejected) == (1, 0.0, 1, 1)

    alice2, bob2 = table["c2"]
    # alice: 7500 + 5000 = 12500, +25%; (1 - 1)^2 = 0, and the market's (0.5 - 1)^2 = 0.25
    assert (alice2.total_value, alice2.return_pct, alice2.brier) == (12_500.0, 25.0, 0.0)
    assert (alice2.bss, alice2.brier_paid) == (1.0, 0.25)
    # bob: 9525, -4.75%; realized 475 - 950 = -475; two losing buys at 0.4: 0.16 each
    assert (bob2.total_value, bob2.return_pct, bob2.realized_pnl) == (9_525.0, -4.75, -475.0)
    assert bob2.brier == pytest.approx(0.16)
    # BSS 1 - 0.16 / 0.25 = 0.36; the market paid 0.5 both times: (0.5 - 0)^2 = 0.25, same
    assert bob2.bss == pytest.approx(0.36)
    assert bob2.brier_paid == pytest.approx(0.25)
    assert (bob2.n_resolved, bob2.win_rate, bob2.n_bets, bob2.n_sells) == (2, 0.0, 2, 1)


def test_standings_rank_by_total_value() -> None:
    ledger = Ledger()
    cohort = Trader(ledger, "c", agents=["amy", "zed", "kim"])
    cohort.yes("bin", 0.5)
    cohort.bet("zed", "bin", "YES", 1_000)
    cohort.bet("kim", "bin", "NO", 1_000)
    settle(cohort.state, "bin", 3, "Yes")
    # zed 11000, amy 10000 (no trades), kim 9000
    assert [r.agent for r in cohort_standings(cohort.state)] == ["zed", "amy", "kim"]
    assert [r.agent for r in standings([cohort.state])["c"]] == ["zed", "amy", "kim"]


def test_leaderboard_by_hand() -> None:
    alice, bob = leaderboard(two_cohorts(), interval="cohorts")
    assert (alice.agent, alice.cohorts, bob.agent) == ("alice", 2, "bob")
    assert (alice.interval, alice.n_bets, bob.n_bets) == ("cohorts", 3, 3)
    # pooled skill: 1 - 0.32 / 0.25; the market paid 0.25 (won) and 0.5 (won): its Brier
    # ((0.75)^2 + 0.5^2) / 2 = 0.40625, so 1 - 0.32 / 0.40625
    assert alice.bss == pytest.approx(1 - 0.32 / 0.25)
    assert alice.brier_paid == pytest.approx(0.40625)
    assert alice.bss_market is None  # two resolved bets: too few
    # alice: P/L 1975 + 2500 = 4475 on 2 x 10000 = 22.375%
    assert (alice.total_pnl, alice.pnl_pct) == (4_475.0, 22.375)
    # all her rows: (0.64 + 0) / 2 = 0.32; both won
    assert alice.brier == pytest.approx(0.32)
    assert (alice.win_rate, alice.n_resolved) == (1.0, 2)
    # returns 19.75 and 25: mean 22.375, s = 2.625 * sqrt(2), half-width t1 * s / sqrt(2)
    assert alice.return_mean == 22.375
    assert alice.return_ci_low == pytest.approx(22.375 - T_1 * 2.625)
    assert alice.return_ci_high == pytest.approx(22.375 + T_1 * 2.625)

    # bob: -1500 - 475 = -1975 = -9.875% of 20000
    assert (bob.total_pnl, bob.pnl_pct) == (-1_975.0, -9.875)
    # trade-weighted (0.36 + 0.16 + 0.16) / 3 = 0.2266... differs from the cohort mean 0.26
    assert bob.brier == pytest.approx(0.68 / 3)
    assert bob.brier_mean == pytest.approx(0.26)
    # cohort Briers 0.36 and 0.16: s = 0.1 * sqrt(2), half-width t1 * 0.1
    assert bob.brier_ci_low == pytest.approx(0.26 - T_1 * 0.1)
    assert bob.brier_ci_high == pytest.approx(0.26 + T_1 * 0.1)
    assert (bob.win_rate, bob.n_resolved) == (0.0, 3)


def test_the_bootstrap_over_markets_by_hand() -> None:
    """The two cohorts share both markets, so ``auto`` resamples markets. Alice made 15% on
    ``bin`` and 4.75% on ``other`` in c1, 25% on ``bin`` in c2: a draw's mean return is
    (15 + 25) / 2 · w_bin + 4.75 / 2 · w_other = 20 w_bin + 2.375 w_other, with (w_bin,
    w_other) = (2, 0), (1, 1), (0, 2) at chances 1/4, 1/2, 1/4: 40, 22.375 or 4.75. Their
    standard deviation is 17.625 / √2 = 12.463 (up to the noise of 2,000 draws), and with
    G = 2 markets the interval is 22.375 ± t₁ · √2 · 12.463: honest about two markets."""
    ledger = two_cohorts()
    alice, bob = leaderboard(ledger)
    assert alice.interval == "markets"
    assert alice.return_mean == 22.375
    half = T_1 * math.sqrt(2) * 17.625 / math.sqrt(2)
    assert alice.return_ci_low == pytest.approx(22.375 - half, rel=0.05)
    assert alice.return_ci_high == pytest.approx(22.375 + half, rel=0.05)
    # bob lost on bin only (-9.875 · w_bin): one market carries it, too few for an interval
    assert (bob.return_ci_low, bob.return_ci_high) == (None, None)
    assert (bob.brier_ci_low, bob.brier_ci_high) == (None, None)
    # alice - bob per draw: 29.875 w_bin + 2.375 w_other, sd 27.5 / √2
    diff = paired_returns(ledger, "alice", "bob")
    assert diff.mean == pytest.approx(22.375 + 9.875)
    assert diff.ci_high - diff.ci_low == pytest.approx(2 * T_1 * 27.5, rel=0.05)
    assert not diff.significant
    # the same seed gives the same interval; another seed moves it a little, not much
    assert leaderboard(ledger)[0] == alice
    other = leaderboard(ledger, seed=1)[0]
    assert other.return_ci_low == pytest.approx(alice.return_ci_low, rel=0.05)
    assert leaderboard(ledger, interval="cohorts")[0].interval == "cohorts"


def test_categories_add_up_to_the_leaderboard() -> None:
    """Both markets are uncategorised here (``—``): one row per agent, holding everything."""
    ledger = two_cohorts()
    rows = {r.agent: r for r in categories(ledger)}
    alice = rows["alice"]
    assert (alice.category, alice.markets, alice.n_bets, alice.n_resolved) == ("—", 2, 3, 2)
    # P/L 1500 + 475 + 2500; (15 + 4.75 + 25) / 2 = her mean return; Brier (0.64 + 0) / 2
    assert (alice.pnl, alice.return_pp) == (4_475.0, 22.375)
    assert alice.brier == pytest.approx(0.32)
    bob = rows["bob"]
    # the rejected bet is not a bet; the sold half still counts as the buy it was
    assert (bob.n_bets, bob.n_resolved, bob.pnl, bob.return_pp) == (3, 3, -1_975.0, -9.875)


def test_rows_serialize_with_the_documented_keys() -> None:
    ledger = two_cohorts()
    standing = msgspec.json.decode(msgspec.json.encode(standings(ledger)["c1"][0]))
    assert {
        "agent",
        "cash",
        "positions_value",
        "total_value",
        "pnl",
        "return_pct",
        "brier",
        "n_resolved",
        "win_rate",
        "n_bets",
        "n_rejected",
    } <= set(standing)
    row = msgspec.json.decode(msgspec.json.encode(leaderboard(ledger)[0]))
    assert {
        "agent",
        "cohorts",
        "total_pnl",
        "pnl_pct",
        "brier",
        "win_rate",
        "return_mean",
        "return_ci_low",
        "return_ci_high",
    } <= set(row)


def test_no_resolved_bets_means_no_scores() -> None:
    ledger = Ledger()
    cohort = Trader(ledger, "c")
    cohort.yes("bin", 0.5)
    cohort.bet("alice", "bin", "YES", 1_000)  # still open, never scored
    lonely = leaderboard([cohort.state])[0]
    alice = standings(ledger)["c"][0]
    # unmarked, the position is valued at its fill price: 2000 sh * 0.5 = 1000, P/L 0
    assert (alice.agent, alice.total_value, alice.unrealized_pnl) == ("alice", 10_000.0, 0.0)
    assert (alice.brier, alice.bss, alice.bss_market, alice.win_rate) == (None, None, None, None)
    assert alice.n_resolved == 0
    # a single cohort has a mean but no interval
    assert (lonely.agent, lonely.brier, lonely.win_rate, lonely.brier_mean) == (
        "alice",
        None,
        None,
        None,
    )
    assert (lonely.return_mean, lonely.return_ci_low, lonely.return_ci_high) == (0.0, None, None)


def test_market_skill_is_undefined_when_the_market_was_perfect() -> None:
    ledger = Ledger()
    cohort = Trader(ledger, "c")
    cohort.yes("bin", 1.0)
    cohort.bet("alice", "bin", "YES", 2_500)  # price 1.0, confidence 1.0
    settle(cohort.state, "bin", 3, "Yes")
    alice = cohort_standings(cohort.state)[0]
    # market Brier (1 - 1)^2 = 0: the ratio is undefined
    assert (alice.brier, alice.bss, alice.brier_paid, alice.bss_market) == (0.0, 1.0, 0.0, None)


def quarter_bets(cohort: Trader, agent: str, side: str, count: int) -> None:
    """``count`` bets of a quarter of the agent's cash each: every one at confidence 1."""
    for _ in range(count):
        cohort.bet(agent, "bin", side, cohort.state.books[agent].cash * 0.25)


def test_market_skill_needs_ten_bets_and_a_reference_of_0_04() -> None:
    """Ten YES bets at 0.5, each a quarter of cash (confidence 1), all lost: implied Brier
    (1 − 0)² = 1, the prices' (0.5 − 0)² = 0.25, so BSS mkt = 1 − 1 / 0.25 = −3. Nine are
    too few. Ten NO bets at 0.9 that all won: the prices' (0.9 − 1)² = 0.01 < 0.04, no score."""
    ledger = Ledger()
    cohort = Trader(ledger, "c", agents=["ten", "nine", "sure"])
    cohort.yes("bin", 0.5)
    quarter_bets(cohort, "ten", "YES", 10)
    quarter_bets(cohort, "nine", "YES", 9)
    cohort.yes("bin", 0.1)
    quarter_bets(cohort, "sure", "NO", 10)
    settle(cohort.state, "bin", 3, "No")
    rows = {s.agent: s for s in cohort_standings(cohort.state)}
    ten, nine, sure = rows["ten"], rows["nine"], rows["sure"]
    assert (ten.n_resolved, ten.brier, ten.brier_paid) == (10, 1.0, 0.25)
    assert ten.bss_market == pytest.approx(-3.0)
    assert (nine.n_resolved, nine.brier_paid, nine.bss_market) == (9, 0.25, None)
    assert (sure.n_resolved, sure.brier) == (10, 0.0)
    assert sure.brier_paid == pytest.approx(0.01)
    assert sure.bss_market is None


def test_a_loser_with_small_bets_ranks_last_whatever_its_implied_brier() -> None:
    """``contrarian``'s case: ten $50 long shots at 0.02, all lost, score an implied Brier of
    about 0.0004 (confidence 50 / 2,500 = 0.02 at first), better than a winner's 0.36 ((0.4 −
    1)² for $1,000 of a $10,000 account), yet the winner ranks first: by return."""
    ledger = Ledger()
    cohort = Trader(ledger, "c", agents=["longshot", "modest"])
    cohort.yes("bin", 0.02)
    for _ in range(10):
        cohort.bet("longshot", "bin", "YES", 50)
    cohort.bet("modest", "bin", "NO", 1_000)
    settle(cohort.state, "bin", 3, "No")
    modest, longshot = leaderboard([cohort.state])
    assert (modest.agent, longshot.agent) == ("modest", "longshot")
    assert (longshot.total_pnl, longshot.return_mean) == (-500.0, -5.0)
    assert longshot.brier is not None and modest.brier is not None
    assert longshot.brier < 0.001 < modest.brier == pytest.approx(0.36)
    # the prices paid: 0.02 on a loser and 0.98 on a winner, (0.02)² either way
    assert longshot.brier_paid == pytest.approx(0.0004)
    assert modest.brier_paid == pytest.approx(0.0004)


@settings(max_examples=60, deadline=None)
@given(
    bets=st.lists(
        st.tuples(st.sampled_from(["YES", "NO"]), st.floats(0.01, 0.99), st.floats(50, 2_500)),
        min_size=1,
        max_size=14,
    ),
    winner=st.sampled_from(["Yes", "No"]),
)
def test_market_skill_is_bounded_when_shown(
    bets: list[tuple[str, float, float]], winner: str
) -> None:
    ledger = Ledger()
    cohort = Trader(ledger, "c", agents=["alice"])
    for side, yes, amount in bets:
        cohort.yes("bin", yes)
        cohort.bet("alice", "bin", side, amount)
    settle(cohort.state, "bin", 3, winner)
    (alice,) = cohort_standings(cohort.state)
    if alice.bss_market is not None:
        assert alice.n_resolved >= 10
        assert alice.brier_paid is not None and alice.brier_paid >= MARKET_SKILL_MIN_REFERENCE
        assert 1 - 1 / MARKET_SKILL_MIN_REFERENCE <= alice.bss_market <= 1


# -- confidence intervals ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("df", "t"),
    [(1, 12.706204736), (2, 4.302652730), (3, 3.182446305), (10, 2.228138852), (30, 2.042272456)],
)
def test_t_quantiles_match_the_tables(df: int, t: float) -> None:
    assert t_quantile_975(df) == pytest.approx(t, abs=1e-8)


def test_t_quantile_approaches_the_normal() -> None:
    # large df switch to the Cornish-Fisher expansion: continuous there and near z = 1.95996
    assert t_quantile_975(1_001) == pytest.approx(t_quantile_975(1_000), abs=1e-5)
    assert t_quantile_975(10**7) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(LedgerError):
        t_quantile_975(0)


def test_mean_ci_for_three_values_by_hand() -> None:
    # 10, 20, 30: mean 20, s = sqrt((100 + 0 + 100) / 2) = 10, half = 4.303 * 10 / sqrt(3) = 24.84
    mean, low, high = mean_ci([10.0, 20.0, 30.0])
    assert mean == 20.0
    assert low == pytest.approx(20 - T_2 * 10 / math.sqrt(3))
    assert high == pytest.approx(20 + T_2 * 10 / math.sqrt(3))
    assert (low, high) == pytest.approx((-4.842, 44.842), abs=1e-3)
    assert mean_ci([7.0]) == (7.0, None, None)
    with pytest.raises(LedgerError):
        mean_ci([])


def test_paired_difference_by_hand() -> None:
    # differences 4, 5, 6: mean 5, s = 1, half = 4.303 / sqrt(3) = 2.484 -> (2.516, 7.484)
    diff = paired_difference([5.0, 7.0, 9.0], [1.0, 2.0, 3.0])
    assert diff.mean == 5.0
    assert (diff.ci_low, diff.ci_high) == pytest.approx((2.516, 7.484), abs=1e-3)
    assert diff.significant
    # differences 1, -1, 3: mean 1, s = 2, half = 4.303 * 2 / sqrt(3) = 4.969: spans zero
    mean, low, high, significant = paired_difference([1.0, 0.0, 3.0], [0.0, 1.0, 0.0])
    assert (mean, significant) == (1.0, False)
    assert (low, high) == pytest.approx((-3.969, 5.969), abs=1e-3)
    # a lone pair has no interval and is never significant
    assert paired_difference([3.0], [1.0]) == (2.0, None, None, False)
    with pytest.raises(LedgerError, match="differ in length"):
        paired_difference([1.0, 2.0], [1.0])


def test_categories_grouped_keep_the_tapes_labels() -> None:
    """``bin`` labelled "senates" and ``other`` "pennsylvania", both grouped as Politics: one
    row per agent adding up to the same figures as the ungrouped table, with both labels."""
    ledger = two_cohorts()
    for state in ledger.cohorts.values():
        for market, label in (("bin", "senates"), ("other", "pennsylvania")):
            state.markets[market] = msgspec.structs.replace(state.markets[market], category=label)
    raw = {(r.agent, r.category): r for r in categories(ledger)}
    assert set(raw) == {("alice", "senates"), ("alice", "pennsylvania"), ("bob", "senates")}
    grouped = {r.agent: r for r in categories(ledger, lambda label: "Politics")}
    alice, bob = grouped["alice"], grouped["bob"]
    assert (alice.category, alice.labels, alice.markets) == (
        "Politics", ("pennsylvania", "senates"), 2
    )  # fmt: skip
    # P/L 1500 + 475 + 2500 and 15 + 4.75 + 25 over 2 cohorts, as ungrouped above
    assert (alice.pnl, alice.return_pp, alice.n_bets) == (4_475.0, 22.375, 3)
    assert (bob.labels, bob.pnl) == (("senates",), -1_975.0)
    assert all(r.labels == () for r in raw.values())


def test_the_two_briers_of_docs_reports() -> None:
    """docs/reports.md's example: $500 on YES at 0.60 that won, then $2,375 (25% of the $9,500
    left) on NO at 0.30 that lost. Paid: ((0.6 − 1)² + 0.3²) / 2 = 0.125; implied: ((0.2 − 1)²
    + (1 − 0)²) / 2 = 0.82; two bets are too few for BSS mkt."""
    ledger = Ledger()
    cohort = Trader(ledger, "c", agents=["alice"])
    cohort.yes("bin", 0.6)
    cohort.bet("alice", "bin", "YES", 500)
    cohort.yes("other", 0.7)  # NO at 0.30
    cohort.bet("alice", "other", "NO", 2_375)
    settle(cohort.state, "bin", 3, "Yes")
    settle(cohort.state, "other", 3, "Yes")
    (alice,) = cohort_standings(cohort.state)
    assert alice.brier_paid == pytest.approx(0.125)
    assert alice.brier == pytest.approx(0.82)
    assert (alice.n_resolved, alice.bss_market) == (2, None)


@settings(max_examples=100, deadline=None)
@given(
    cohorts=st.lists(
        st.lists(
            st.tuples(st.sampled_from("abcdef"), st.floats(0.0, 1.0), st.booleans()),
            max_size=30,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_category_briers_add_up_row_by_row_in_the_rows_order(
    cohorts: list[list[tuple[str, float, bool]]],
) -> None:
    """Each category's Brier is the float a row-by-row fold gives (every cohort's rows in
    turn, each in its order), not a regrouped sum: floats added in another order can differ
    in the last place (0.1 + 0.2 + 0.3 is 0.6000000000000001, fsum gives 0.6), and a
    report prints them whole. Markets a-c are one category, d-f another, so rows of one
    category interleave with the other's."""
    category = {m: ("Politics" if m in "abc" else "Sports") for m in "abcdef"}
    states = []
    for k, rows in enumerate(cohorts):
        state = CohortState(f"c{k}")
        state.markets = {
            m: MarketListed(cohort=state.cohort, ts=0, market=m, question=m,
                            outcomes=["Yes", "No"], volume=1.0, category=category[m])
            for m in "abcdef"
        }  # fmt: skip
        book = Book(agent="x", cash=100.0, initial_cash=100.0)
        book.brier_rows = [
            BrierRow(order_id=f"o{j}", market=m, side="YES", confidence=c, won=int(w),
                     price=c, belief=None)
            for j, (m, c, w) in enumerate(rows)
        ]  # fmt: skip
        state.books = {"x": book}
        states.append(state)
    summed: dict[str, float] = {}
    counted: dict[str, int] = {}
    for rows in cohorts:
        for m, c, w in rows:
            summed[category[m]] = summed.get(category[m], 0.0) + (c - int(w)) ** 2
            counted[category[m]] = counted.get(category[m], 0) + 1
    found = {r.category: (r.n_resolved, r.brier) for r in categories(states)}
    assert found == {c: (counted[c], summed[c] / counted[c]) for c in summed}
