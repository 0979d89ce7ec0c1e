"""``arena strategy new``: the names it derives, what it refuses, and a package that works as
generated (its own test passes, and arena loads it from a file spec)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.commands.strategy import NAME_PATTERN, PluginNames
from ledger.rules import RULES
from strategies.api import MarketMeta, MarketsView, Strategy, StrategyError, View
from strategies.loader import BUILTINS, build_strategy
from tests.conftest import Arena


@pytest.fixture(scope="module")
def plugin(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("plugins") / "cheapskate"
    result = arena("strategy", "new", "cheapskate", "--dir", target, "--json")
    assert result.exit_code == 0, result.output
    return target


@pytest.fixture(scope="module")
def cheapskate(plugin: Path) -> Strategy:
    return build_strategy(f"{plugin}/cheapskate/strategy.py:Cheapskate")


def test_names_follow_from_the_slug() -> None:
    assert PluginNames.from_name("cheapskate") == PluginNames(
        "cheapskate", "cheapskate", "Cheapskate"
    )
    assert PluginNames.from_name("long-shot_2") == PluginNames(
        "long-shot_2", "long_shot_2", "LongShot2"
    )


@given(st.from_regex(NAME_PATTERN, fullmatch=True))
def test_every_accepted_name_gives_python_identifiers(name: str) -> None:
    try:
        names = PluginNames.from_name(name)
    except ValueError:
        return  # a reserved name: refused with its own message, tested below
    assert names.package.isidentifier() and names.class_name.isidentifier()
    assert names.class_name[0].isupper()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Cheap", "lower-case"),
        ("1st", "lower-case"),
        ("cheap skate", "lower-case"),
        ("a--b", "lower-case"),
        ("trailing-", "lower-case"),
        ("favourite", "built-in"),
        ("class", "clash"),
        ("tests", "clash"),
        ("view", "clash"),
        ("json", "shadow"),
        ("numpy", "shadow"),
    ],
)
def test_bad_names_are_refused_in_one_line(
    arena: Arena, name: str, reason: str, tmp_path: Path
) -> None:
    result = arena("strategy", "new", name, "--dir", tmp_path / "x")
    assert result.exit_code == 1
    assert (
        result.output.startswith("Error: ")
        and result.output.count("\n") == 1
        and reason in result.output
    )
    assert not (tmp_path / "x").exists()


def test_generated_layout_and_entry_point(plugin: Path) -> None:
    files = sorted(str(p.relative_to(plugin)) for p in plugin.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "cheapskate/__init__.py",
        "cheapskate/strategy.py",
        "pyproject.toml",
        "tests/test_cheapskate.py",
    ]
    project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
    assert project["name"] == "cheapskate" and project["dependencies"] == ["arena"]
    assert project["entry-points"] == {
        "arena.strategies": {"cheapskate": "cheapskate.strategy:Cheapskate"}
    }
    for path in plugin.rglob("*"):
        if path.is_file():
            assert "{{" not in path.read_text(), f"{path} has an unfilled placeholder"


def test_json_says_what_was_created(arena: Arena, tmp_path: Path) -> None:
    result = arena("strategy", "new", "long-shot", "--dir", tmp_path / "ls", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["entry_point"] == "long-shot = long_shot.strategy:LongShot"
    assert data["spec"].endswith("/long_shot/strategy.py:LongShot")
    assert "tests/test_long_shot.py" in data["files"]


def test_existing_directory_needs_force(arena: Arena, tmp_path: Path) -> None:
    target = tmp_path / "mine"
    assert arena("strategy", "new", "mine", "--dir", target).exit_code == 0
    source = target / "mine" / "strategy.py"
    original = source.read_text()
    source.write_text("# my edits\n")
    (target / "notes.txt").write_text("keep me")
    result = arena("strategy", "new", "mine", "--dir", target)
    assert result.exit_code == 1 and "--force" in result.output and result.output.count("\n") == 1
    assert source.read_text() == "# my edits\n"
    assert arena("strategy", "new", "mine", "--dir", target, "--force").exit_code == 0
    assert source.read_text() == original
    assert (target / "notes.txt").read_text() == "keep me"  # --force replaces, never deletes


def test_an_empty_directory_is_used_without_force(arena: Arena, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert arena("strategy", "new", "empty", "--dir", tmp_path / "empty").exit_code == 0
    assert (tmp_path / "empty" / "empty" / "strategy.py").is_file()


def test_a_file_in_the_way_is_refused(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default target is ./NAME
    Path("taken").write_text("")
    result = arena("strategy", "new", "taken", "--force")
    assert result.exit_code == 1 and result.output == "Error: taken exists and is not a directory\n"


def test_help_has_an_example(arena: Arena) -> None:
    result = arena("strategy", "new", "--help")
    assert result.exit_code == 0 and "arena strategy new cheapskate" in result.output


@pytest.mark.slow  # pytest in a fresh process on the generated plugin
def test_the_generated_test_passes_as_generated(plugin: Path) -> None:
    # No pip install: the generated pyproject puts the package on pytest's path itself.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=plugin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_loads_from_a_file_spec_with_settings(plugin: Path) -> None:
    loaded = build_strategy(f"{plugin}/cheapskate/strategy.py:Cheapskate?threshold=0.1&stake=60")
    assert type(loaded).__name__ == "Cheapskate"
    assert (loaded.settings.threshold, loaded.settings.stake) == (0.1, 60.0)  # type: ignore[attr-defined]
    with pytest.raises(StrategyError, match="threshold"):
        build_strategy(f"{plugin}/cheapskate/strategy.py:Cheapskate?threshold=0.9")


# -- the example strategy's decide(), on views built by hand ---------------------------------


def view(yes: list[float], cash: float = 10_000.0, held: tuple[int, ...] = ()) -> View:
    ids = tuple(f"m{i}" for i in range(len(yes)))
    prices = np.array(yes, dtype=np.float64)
    shares = np.zeros((len(yes), 2))
    shares[list(held), 0] = 10.0
    markets = MarketsView(
        ts=0,
        ids=ids,
        index={m: i for i, m in enumerate(ids)},
        meta=[MarketMeta(m, "?", ("Yes", "No"), None, 0.0, None, True) for m in ids],
        yes=prices,
        open_mask=~np.isnan(prices),
        volume=np.zeros(len(yes)),
        binary=np.ones(len(yes), dtype=bool),
        prices=lambda i: None,
        history=lambda i, t, since: (np.array([]), np.array([])),
    )
    return View(0, 0, cash, RULES["v1"], markets, shares, lambda: ())


def test_decide_buys_cheap_sides_cheapest_first(cheapskate: Strategy) -> None:
    # Cheaper side: m0 YES at 0.12, m1 NO at 1 - 0.95 = 0.05, m2 0.5 (not cheap), m3 no price,
    # m4 YES at 0.01 but already held. Under 0.15, cheapest first: m1 (0.05), then m0 (0.12).
    decision = cheapskate.decide(view([0.12, 0.95, 0.5, float("nan"), 0.01], held=(4,)))
    assert [(b.market, b.side, b.amount) for b in decision.bets] == [
        ("m1", "NO", 100.0),
        ("m0", "YES", 100.0),
    ]


def test_decide_sizes_to_cash(cheapskate: Strategy) -> None:
    # $300 cash: the largest bet is 0.25 × 300 = $75 < the $100 stake, so $75.
    [bet] = cheapskate.decide(view([0.1], cash=300.0)).bets
    assert bet.amount == 75.0
    # $150 cash: 0.25 × 150 = $37.50 is under the $50 minimum bet, so it holds.
    assert cheapskate.decide(view([0.1], cash=150.0)).action == "HOLD"


@given(
    st.lists(st.one_of(st.floats(0.0, 1.0), st.just(float("nan"))), min_size=1, max_size=30),
    st.sets(st.integers(0, 29)),
)
def test_decide_never_breaks_its_own_rules(
    cheapskate: Strategy, yes: list[float], held: set[int]
) -> None:
    held_here = tuple(i for i in held if i < len(yes))
    decision = cheapskate.decide(view(yes, held=held_here))
    settings = cheapskate.settings
    assert len(decision.bets) <= settings.markets  # type: ignore[attr-defined]
    assert len({b.market for b in decision.bets}) == len(decision.bets)
    for bet in decision.bets:
        i = int(bet.market[1:])
        side_price = yes[i] if bet.side == "YES" else 1.0 - yes[i]
        assert side_price < settings.threshold and i not in held_here  # type: ignore[attr-defined]


def test_builtin_names_stay_reserved() -> None:
    for name in BUILTINS:
        with pytest.raises(ValueError, match="built-in"):
            PluginNames.from_name(name)
