"""A mistyped name gets the name meant, in the one-line error."""

from __future__ import annotations

import pytest

from strategies.api import StrategyError
from strategies.forecaster_registry import build_forecaster
from strategies.loader import build_strategy
from strategies.suggest import did_you_mean, nearest


def test_nearest_and_its_wording() -> None:
    assert nearest("favorite", ["hold", "favourite", "random"]) == "favourite"
    assert nearest("zzz", ["hold", "favourite"]) is None
    assert did_you_mean("favorite", ["favourite"]) == " (did you mean favourite?)"
    assert did_you_mean("favourite", ["favourite"]) == ""
    assert did_you_mean("qqqq", ["favourite"]) == ""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("favorite", "unknown strategy 'favorite' (did you mean favourite?): use a built-in"),
        ("favourite?stak=3", "stak: Extra inputs are not permitted (did you mean stake?)"),
        ("sign?forecastr=market", "forecastr: Extra inputs are not permitted (did you mean "
         "forecaster?)"),
        ("nosuch", "unknown strategy 'nosuch': use a built-in"),
    ],
)  # fmt: skip
def test_a_typo_in_a_spec_names_what_was_meant(spec: str, message: str) -> None:
    with pytest.raises(StrategyError) as raised:
        build_strategy(spec)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_typo_in_a_forecaster_names_what_was_meant() -> None:
    with pytest.raises(StrategyError, match=r"'extremised' \(did you mean extremized\?\): use"):
        build_forecaster("extremised")
    with pytest.raises(StrategyError, match=r"'extremised' \(did you mean extremized\?\)"):
        build_strategy("sign?forecaster=extremised")
