"""Sweeping a strategy's settings over many cohorts, with the comparison agents run once.

A sweep is a grid of settings (``B=100,500;min_edge=0,0.02`` is four) crossed with the starts of
a backtest. Agents in a cohort never touch each other's books (fills are at the tape's prices),
so each setting runs in a cohort of its own, one agent, and the comparison agents run once per
start in one shared cohort: an extra setting costs one single-agent cohort-run per start, not
another replay of every baseline. Cohorts of one start share universe and instants whatever
their agents, so a setting is paired with the comparison agents start by start.

Every cohort has its id (a hash of everything that shapes its log), so a sweep started again on
the same log runs only the cohorts it does not hold complete (``replay_cohorts``'s
``skip_finished``).

Picking the best of many settings by its results flatters it: the winner's mean is biased up
and its interval too narrow for having been chosen. The results say how many settings were
tried, and name starts to confirm the winner on: starts the sweep did not use *and* whose
markets it did not trade. A cohort runs until its markets resolve, so on a tape of long-lived
markets every Sunday's cohort trades the same markets to the same outcomes (on the bundled
sample, all 101); a backtest on the other Sundays would meet again the outcomes that picked
the winner, and is no confirmation.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import msgspec
from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from arena.backtests.backtest import default_plans, plan_backtest, sunday_configs
from arena.backtests.narrow import runs_that_fit, stacked
from arena.boundary.isolated import check_spec
from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.engines.recorded import CohortDone
from arena.errors import ArenaError
from arena.reports.model import IntervalSettings, interval_info, iso_utc, load_ledger
from arena.reports.terminal import fit_names, table_width
from arena.run.cohort import CohortConfig
from arena.run.pace import Watcher
from arena.run.plan import CohortPlan, PlannedCohort, Skipped
from arena.run.settings import DEFAULT_OPTIONS, RunOptions
from ledger.leaderboard import interval_method, leaderboard, paired_returns
from ledger.projection import CohortState
from ledger.store import EventStore
from replays.samples import sample_path
from strategies.api import StrategyError
from strategies.loader import AgentSpec, derived_name, name_specs

Grid = tuple[tuple[str, tuple[str, ...]], ...]
"""``((key, (value, ...)), ...)`` in the order given; values as the query string has them."""


class SweepError(ArenaError, ValueError):
    """A grid or sweep file a sweep cannot run with; the message is one line for the CLI."""


def parse_grid(text: str) -> Grid:
    """``B=100,500;min_edge=0,0.02`` as a grid; SweepError saying what is wrong otherwise."""
    grid: list[tuple[str, tuple[str, ...]]] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, sep, values = part.partition("=")
        items = tuple(v.strip() for v in values.split(","))
        if not sep or not key.strip() or not all(items):
            raise SweepError(f"grid part {part!r} is not KEY=V1,V2,...")
        grid.append((key.strip(), items))
    return check_grid(tuple(grid))


def check_grid(grid: Grid) -> Grid:
    if not grid:
        raise SweepError("the grid is empty: give at least one KEY=V1,V2,...")
    keys = [key for key, _ in grid]
    for key, values in grid:
        if not values:  # a sweep file's 'B = []': every setting of the grid would be none
            raise SweepError(f"grid gives {key!r} no values")
        if keys.count(key) > 1:
            raise SweepError(f"grid names {key!r} twice")
        if len(set(values)) < len(values):
            raise SweepError(f"grid repeats a value of {key!r}")
    return grid


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise SweepError(f"grid value {value!r} is not a string, number or boolean")


@dataclass(frozen=True)
class SweepFile:
    """A TOML sweep file: ``strategy``, a ``[grid]`` table of lists, and optionally
    ``against`` (a list of specs, or a table of NAME = SPEC), ``starts`` (FROM..TO) and any of
    ``universe``, ``cash``, ``rules``, ``decisions``, ``marks``, ``seed``."""

    strategy: str | None
    grid: Grid
    against: tuple[str, ...] | None
    starts: str | None
    cohort: dict[str, Any]


FILE_COHORT_KEYS = ("universe", "cash", "rules", "decisions", "marks", "seed")


def read_sweep_file(path: Path) -> SweepFile:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SweepError(f"{path}: {exc}") from None
    known = {"strategy", "grid", "against", "starts", *FILE_COHORT_KEYS}
    if unknown := sorted(set(data) - known):
        raise SweepError(f"{path}: unknown key(s) {', '.join(unknown)}")
    table = data.get("grid")
    if not isinstance(table, dict) or not table:
        raise SweepError(f"{path}: needs a [grid] table of KEY = [values]")
    grid = tuple(
        (str(key), tuple(map(_toml_value, values if isinstance(values, list) else [values])))
        for key, values in table.items()
    )
    against = data.get("against")
    if isinstance(against, dict):
        against = [f"{name}={spec}" for name, spec in against.items()]
    if against is not None and not (
        isinstance(against, list) and all(isinstance(a, str) for a in against)
    ):
        raise SweepError(f"{path}: against is a list of specs or a table of NAME = SPEC")
    strategy, starts = data.get("strategy"), data.get("starts")
    if not isinstance(strategy, str | None) or not isinstance(starts, str | None):
        raise SweepError(f"{path}: strategy and starts are strings")
    cohort = {key: data[key] for key in FILE_COHORT_KEYS if key in data}
    return SweepFile(strategy, check_grid(grid), tuple(against or ()) if against is not None
                     else None, starts, cohort)  # fmt: skip


@dataclass(frozen=True)
class Setting:
    """One point of the grid: the agent's name, its spec and the grid's values there."""

    name: str
    spec: str
    values: dict[str, str]


def settings_of(strategy: str, grid: Grid) -> list[Setting]:
    """Every combination of the grid, in the grid's order (the last key varies fastest), each
    the base spec with the grid's values put over its own settings."""
    parsed = AgentSpec.parse(strategy)
    body = strategy.partition("?")[0]
    keys = [key for key, _ in grid]
    out = []
    for combo in itertools.product(*(values for _, values in grid)):
        values = dict(zip(keys, combo, strict=True))
        spec = f"{body}?{urlencode({**parsed.settings, **values}, safe=',:/')}"
        out.append(Setting(derived_name(spec, keys), spec, values))
    return out


@dataclass(frozen=True)
class SweepPlan:
    """Everything that shapes a sweep's results, validated before any cohort runs."""

    strategy: str
    grid: Grid
    settings: tuple[Setting, ...]
    against: dict[str, str]
    source: TapeSource
    starts: tuple[datetime, ...]
    plans: tuple[CohortPlan, ...]
    """Per start, its cohorts' plan: every cohort of a start trades the same universe on the
    same schedule, whichever agents it holds."""
    cohort: dict[str, Any]
    """Every ``CohortConfig`` field but the start and the agents, alike in every cohort."""
    offered: tuple[datetime, ...]
    """Every start the tape offers a full universe on (``backtest.default_starts``)."""
    skipped: tuple[Skipped, ...] = ()
    independent: tuple[datetime, ...] = ()
    """The offered starts the sweep does not use whose universe shares no market with a swept
    cohort's: where the winner meets outcomes it was not picked on."""

    def cohorts(self) -> list[PlannedCohort]:
        """Per start: the comparison agents' cohort, then one cohort per setting."""
        out = []
        for start, plan in zip(self.starts, self.plans, strict=True):
            groups = [self.against] if self.against else []
            groups += [{s.name: s.spec} for s in self.settings]
            out += [
                PlannedCohort(CohortConfig(start=start, agents=agents, **self.cohort), plan)
                for agents in groups
            ]
        return out

    def as_data(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "grid": {key: list(values) for key, values in self.grid},
            "against": self.against,
            "tape_path": str(self.source.path),
            "starts": [iso_utc(int(s.timestamp())) for s in self.starts],
            **self.cohort,
        }


def plan_sweep(
    strategy: str,
    grid: Grid,
    against: Sequence[str],
    source: TapeSource,
    starts: Sequence[datetime] | None = None,
    *,
    isolate: bool = False,
    **cohort: Any,
) -> SweepPlan:
    """Check the grid, every spec and the starts (as ``plan_backtest`` does); SweepError or
    BacktestError with one line otherwise. With ``isolate`` every spec is checked in a
    confined worker (``check_spec``): a plugin's import and constructor never run here."""
    settings = settings_of(strategy, grid)
    try:
        named = name_specs(against, taken=[s.name for s in settings])
        for setting in settings:
            check_spec(setting.spec, isolate)
    except StrategyError as exc:
        raise SweepError(str(exc).splitlines()[0]) from None
    tape = source.tape
    base = plan_backtest(strategy, against, source, starts, isolate=isolate, **cohort)
    shared = base.cohorts[0].model_dump(exclude={"start", "agents"})
    offered = default_plans(tape, sunday_configs(tape, base.agents, **shared))
    independent = _independent_starts(offered, base.planned)
    return SweepPlan(
        strategy=strategy,
        grid=grid,
        settings=tuple(settings),
        against=named,
        source=source,
        starts=base.starts,
        plans=tuple(p.plan for p in base.planned),
        cohort=shared,
        offered=tuple(p.config.start for p in offered),
        skipped=base.skipped,
        independent=independent,
    )


def _independent_starts(
    offered: Sequence[PlannedCohort], swept: Sequence[PlannedCohort]
) -> tuple[datetime, ...]:
    """The offered starts not swept whose universe is disjoint from every swept one's."""
    traded = {m for cohort in swept for m in cohort.plan.universe}
    starts = {cohort.config.start for cohort in swept}
    return tuple(
        o.config.start
        for o in offered
        if o.config.start not in starts and traded.isdisjoint(o.plan.universe)
    )


# -- running and results -------------------------------------------------------------------------


@dataclass
class SweepResult:
    plan: SweepPlan
    done: list[CohortDone]
    states: dict[str, CohortState]
    digest: str
    db: Path

    @property
    def reused(self) -> int:
        """Cohorts the log already held complete, not run again."""
        return sum(1 for d in self.done if d.appended == 0)


def run_sweep(
    plan: SweepPlan,
    db: Path,
    options: RunOptions = DEFAULT_OPTIONS,
    *,
    on_done: Callable[[CohortDone], None] | None = None,
    on_decision: Watcher | None = None,
) -> SweepResult:
    """Replay what the log lacks of the sweep (as ``options`` say: engine, workers, time
    limit), then fold every cohort; ``on_decision`` is told of each decision made."""
    done = replay_cohorts(
        plan.source, plan.cohorts(), db, options, skip_finished=True, on_done=on_done,
        on_decision=on_decision,
    )  # fmt: skip
    cohorts = [d.cohort for d in done]
    with EventStore.open(db, readonly=True) as store:
        ledger = load_ledger(store, cohorts)
        digest = store.digest(streams=cohorts)
    return SweepResult(plan, done, dict(ledger.cohorts), digest, db)


def _held_out_range(plan: SweepPlan) -> str | None:
    """The longest run of consecutive offered starts independent of the sweep (not used, no
    market in common), as FROM..TO."""
    independent = set(plan.independent)
    runs: list[list[datetime]] = [[]]
    for start in plan.offered:
        if start not in independent:
            runs.append([])
        else:
            runs[-1].append(start)
    best = max(runs, key=len)
    return f"{best[0]:%Y-%m-%d}..{best[-1]:%Y-%m-%d}" if best else None


def results_data(result: SweepResult) -> dict[str, Any]:
    """The sweep as plain data: what ``--json`` prints and the tables show."""
    plan = result.plan
    by_cohort = [result.states[d.cohort] for d in result.done]
    one_per_start = [s for s in by_cohort if plan.settings[0].name in s.books]
    method = interval_method(one_per_start)
    board = {row.agent: row for row in leaderboard(by_cohort, interval=method)}
    rows = []
    for setting in plan.settings:
        row = msgspec.to_builtins(board[setting.name])
        row.update(spec=setting.spec, values=setting.values)
        row["paired"] = {
            name: paired_returns(by_cohort, setting.name, name, interval=method)._asdict()
            for name in plan.against
        }
        rows.append(row)
    best = max(rows, key=lambda r: (r["return_mean"], r["agent"]))
    comparisons = len(rows) * max(len(plan.against), 1)
    held = _held_out_range(plan)
    return {
        "plan": plan.as_data(),
        "tape": plan.source.tape.hash,
        "package_version": version("arena"),
        "cohort_runs": len(result.done),
        "reused": result.reused,
        "skipped_starts": [iso_utc(int(s.start.timestamp())) for s in plan.skipped],
        "interval": interval_info(one_per_start, IntervalSettings()),
        "settings": rows,
        "comparison": [msgspec.to_builtins(board[name]) for name in plan.against],
        "selection": {
            "best": best["agent"],
            "best_spec": best["spec"],
            "by": "mean return",
            "settings_tried": len(rows),
            "paired_intervals": comparisons if plan.against else 0,
            "expected_false_exclusions": round(0.05 * comparisons, 2) if plan.against else 0,
            "held_out_starts": held,
            "unused_starts": len(set(plan.offered) - set(plan.starts)),
            "confirm": _confirm_command(plan, best["spec"], held),
        },
        "digest": result.digest,
        "db": str(result.db),
    }


def _confirm_command(plan: SweepPlan, spec: str, held: str | None) -> str | None:
    if held is None:
        return None
    against = ",".join(
        s if name == AgentSpec.parse(s).kind else f"{name}={s}" for name, s in plan.against.items()
    )
    parts = ["arena backtest", f"'{spec}'", f"--starts {held}"]
    if against:
        parts.append(f"--against '{against}'")
    if plan.source.path != sample_path():
        parts.append(f"--tape {plan.source.path}")
    return " ".join(parts)


def selection_warning(data: Mapping[str, Any]) -> str:
    """The sentence under the results: how many settings the best was picked from, what that
    does to its figures, and where to confirm it."""
    s = data["selection"]
    n = s["settings_tried"]
    text = (
        f"{s['best']} has the best mean return of {n} setting(s) tried. Picked as the best of "
        f"{n}, its mean is biased upward and its intervals are too narrow: nothing here "
        "corrects for the search"
    )
    if s["paired_intervals"]:
        text += (
            f" (of {s['paired_intervals']} paired 95% intervals, about "
            f"{s['expected_false_exclusions']:g} would exclude 0 by chance alone)"
        )
    if s["confirm"]:
        return (
            text + f". Confirm it on starts whose markets the sweep did not trade: {s['confirm']}"
        )
    if s["unused_starts"]:
        return text + (
            f". The {s['unused_starts']} start(s) the sweep did not use trade markets it traded, "
            "to the same outcomes, so they cannot confirm it: confirm it on another tape or a "
            "later recording"
        )
    return text + (
        ". Every start this tape offers was swept: confirm it on another tape or a later recording"
    )


def _plus_minus(mean: float | None, low: float | None, high: float | None, fmt: str) -> str:
    """``mean ±half``: every interval here is symmetric (the estimate ± a t quantile times
    a standard error, ``ledger.intervals``), so the half-width says it in half the room."""
    if mean is None:
        return "—"
    text = fmt.format(mean)
    if low is None or high is None:
        return text
    return f"{text} ±{(high - low) / 2:{fmt[2:-1].lstrip('+')}}"


def _paired(pair: Mapping[str, Any]) -> str:
    mark = "[green]✓[/]" if pair["significant"] else "·"
    return f"{_plus_minus(pair['mean'], pair['ci_low'], pair['ci_high'], '{:+.2f}')} {mark}"


def settings_table(data: Mapping[str, Any], width: int | None = None) -> RenderableType:
    """One row per setting (and per comparison agent): mean return, Brier, win rate, bets, and
    the paired difference to each comparison agent; in ``width`` cells, the settings cut in the
    middle as the report cuts names (``fit_names``), since they differ at the end.

    Where even the narrowest names leave one table too wide (80 columns with two comparison
    agents), the paired differences go under it in tables of their own, as many agents to a
    table as fit: in one table Rich squeezed every number to "-8.43 ±10…" and the settings to
    "B=10…e…"."""
    labels = {r["agent"]: " ".join(f"{k}={v}" for k, v in r["values"].items())
              for r in data["settings"]}  # fmt: skip
    against = list(data["plan"]["against"])
    title = f"{len(data['settings'])} setting(s) × {len(data['plan']['starts'])} start(s): "
    caption = (
        f"{data['interval']['text']}. Brier (impl., mean of cohorts): the mean over cohorts of "
        "each cohort's implied-confidence Brier (bet / 25% of cash, against the result, over "
        "resolved bets), not the Brier pooled over every bet that arena report and arena "
        "backtest show; win rate and bets over all cohorts."
    )
    paired = "setting − agent in return points, paired start by start (✓: the interval excludes 0)"

    def fitted(metrics: bool, agents: Sequence[str], title: str | None) -> Table:
        return fit_names(
            list(labels.values()),
            lambda cut: _settings_table(
                data, {a: cut[x] for a, x in labels.items()}, metrics, agents, title,
                caption if metrics else None,
            ),
            width,
        )  # fmt: skip

    whole = fitted(True, against, title + f"mean ± half its 95% interval; {paired}")
    if width is None or not against or table_width(whole) <= width:
        return whole
    runs = runs_that_fit(against, lambda run: table_width(fitted(False, run, None)) <= width)
    return stacked(
        [
            fitted(True, [], title + "mean ± half its 95% interval"),
            *(fitted(False, run, None if k else paired) for k, run in enumerate(runs)),
        ]
    )


def _settings_table(
    data: Mapping[str, Any],
    labels: Mapping[str, str],
    metrics: bool,
    against: Sequence[str],
    title: str | None,
    caption: str | None,
) -> Table:
    """The settings' rows with their figures (``metrics``) and their paired differences to
    ``against``; the comparison agents' own rows only beside the figures."""
    best = data["selection"]["best"]
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left",
                  header_style="bold")  # fmt: skip
    table.add_column("setting", no_wrap=True)
    for name in (
        ["return %", "Brier (impl.,\nmean of\ncohorts)", "win rate", "bets"] if metrics else []
    ):
        table.add_column(name, justify="right", no_wrap=True)
    for name in against:
        table.add_column(f"− {name}", justify="right", no_wrap=True)

    def cells(row: Mapping[str, Any]) -> list[str]:
        if not metrics:
            return []
        return [
            _plus_minus(row["return_mean"], row["return_ci_low"], row["return_ci_high"],
                        "{:+.2f}"),
            _plus_minus(row["brier_mean"], row["brier_ci_low"], row["brier_ci_high"], "{:.3f}"),
            _plus_minus(row["win_rate"], None, None, "{:.1%}"),
            str(row["n_bets"]),
        ]  # fmt: skip

    for row in data["settings"]:
        star = " [bold]★[/]" if row["agent"] == best else ""
        table.add_row(escape(labels[row["agent"]]) + star, *cells(row),
                      *(_paired(row["paired"][a]) for a in against))  # fmt: skip
    for row in data["comparison"] if metrics else []:
        table.add_row(f"[dim]{escape(row['agent'])}[/]", *cells(row), *("" for _ in against))
    return table
