"""``View.budget()`` sizes a decision's bets the way the broker will judge them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.rules import RULES
from replays.samples import sample_path
from replays.tapefile import load_tape
from strategies.api import Budget


def test_v1_caps_each_bet_against_the_cash_left() -> None:
    budget = Budget(10_000.0, RULES["v1"])
    assert budget.take(3_000.0) == 2_500.0  # 0.25 x 10,000
    assert budget.take(2_500.0) == 1_875.0  # 0.25 x (10,000 - 2,500)
    assert budget.room() == 1_406.25  # 0.25 x 5,625
    assert budget.take(40.0) == 0.0  # below the $50 minimum: nothing taken
    assert budget.spent == 4_375.0


def test_v2_shares_one_allowance_across_the_decision() -> None:
    budget = Budget(10_000.0, RULES["v2"])
    assert budget.take(2_000.0) == 2_000.0
    assert budget.take(2_000.0) == 500.0  # 2,500 in all
    assert budget.take(100.0) == 0.0 and budget.room() == 0.0


def test_room_is_in_whole_cents_rounded_down() -> None:
    assert Budget(1_000.01, RULES["v1"]).room() == 250.0  # not 250.0025


@given(
    st.floats(min_value=0, max_value=1e6),
    st.lists(st.floats(min_value=0, max_value=1e5), max_size=8),
    st.booleans(),
)
def test_what_a_budget_allows_the_broker_fills(cash: float, wanted: list[float], v2: bool) -> None:
    """Every amount a budget hands out passes the broker's caps for that rules version."""
    budget = Budget(cash, RULES["v2" if v2 else "v1"])
    amounts = [a for a in (budget.take(w) for w in wanted) if a]
    assert all(a >= 50.0 for a in amounts)
    if v2:
        assert sum(amounts) <= 0.25 * cash + 1e-9
    else:
        left = cash
        for a in amounts:
            assert a <= 0.25 * left + 1e-9
            left -= a


@pytest.mark.parametrize("rules", ["v1", "v2"])
def test_the_price_side_baselines_are_never_rejected_on_the_sample(rules: str) -> None:
    config = CohortConfig(
        start=datetime(2024, 6, 2, tzinfo=UTC),
        agents={"fav": "favourite?markets=6", "dog": "contrarian?markets=6"},
        rules=rules,  # type: ignore[arg-type]
    )
    run = CohortRunner(load_tape(sample_path()), config).run(None)
    assert all(b.n_rejected == 0 and b.n_bets > 0 for b in run.state.books.values())


@settings(deadline=None)  # the first example imports test_rules: 456 ms on a busy machine
@given(
    st.floats(min_value=0, max_value=1e6),
    st.lists(st.floats(min_value=0, max_value=1e5), max_size=8),
    st.sampled_from(["v1", "v2"]),
)
def test_the_broker_fills_every_bet_a_budget_sizes(
    cash: float, wanted: list[float], version: str
) -> None:
    """The budget and the broker ask the same RuleSet: a decision sized by the budget has no
    rejection under either version (v2 would reject the whole batch for one leg too many)."""
    from ledger.events import BetIntent, OrderFilled, OrderRejected
    from ledger.rules import Broker
    from tests.ledger.test_rules import Prices, make_state

    rules = RULES[version]
    budget = Budget(cash, rules)
    amounts = [a for a in (budget.take(w) for w in wanted) if a]
    state = make_state(cash, version)
    bets = [BetIntent(market="bin", side="YES", amount=a) for a in amounts]
    events = Broker(state, rules).execute("alice", 10, bets, [], Prices())
    assert not [e for e in events if isinstance(e, OrderRejected)]
    assert [e.amount for e in events if isinstance(e, OrderFilled)] == amounts
