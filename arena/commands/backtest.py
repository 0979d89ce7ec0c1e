"""``arena backtest``: one strategy against the baselines over many cohorts, with intervals."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import RenderableType
from rich.table import Table

from arena.backtests.backtest import (
    DEFAULT_AGAINST,
    STRATEGY,
    SUMMARY_LEGEND,
    SUMMARY_ORDER,
    backtest_log,
    plan_backtest,
    results_data,
    run_backtest,
)
from arena.backtests.narrow import split_to_fit
from arena.backtests.page import write_backtest_report
from arena.commands.options import CohortChoice, cohort_options, parse_starts
from arena.commands.replay import resumable, skipped_note
from arena.console import make_console, plugins_print_to_stderr
from arena.progress import on_a_terminal, progress_of
from arena.reports.terminal import beliefs_table, house_table


def pct_cell(x: float | None) -> str:
    if x is None:
        return "—"
    colour = "green" if x > 0 else "red" if x < 0 else "white"
    return f"[{colour}]{x:+.2f}%[/]"


def num_cell(x: float | None, fmt: str = "{:.4f}") -> str:
    return "—" if x is None else fmt.format(x)


def interval_cell(low: float | None, high: float | None) -> str:
    return "[—]" if low is None or high is None else f"[{low:+.2f}, {high:+.2f}]"


def cohort_table(data: dict[str, Any], width: int | None = None) -> RenderableType:
    """A cohort a row, an agent a column (return, Brier (impl.) and win rate in one cell); in
    ``width`` cells, as many agents to a table as fit, each table with the cohorts' starts."""
    names = list(data["settings"]["agents"])

    def build(agents: Sequence[str]) -> Table:
        table = house_table("Per cohort: return · Brier (implied confidence) · win rate")
        table.add_column("start", no_wrap=True, min_width=10)
        table.add_column("markets", justify="right", no_wrap=True)
        for name in agents:
            table.add_column(name, justify="right", no_wrap=True)
        for cohort in data["cohorts"]:
            cells = [
                f"{pct_cell(a['return_pct'])} {num_cell(a['brier'], '{:.3f}')} "
                f"{num_cell(a['win_rate'], '{:.0%}')}"
                for a in (cohort["agents"][name] for name in agents)
            ]
            table.add_row(cohort["start"][:10], str(cohort["markets"]), *cells)
        return table

    return split_to_fit(build, names, width)


Column = tuple[str, Callable[[dict[str, Any], dict[str, Any] | None], str]]
"""A summary column: its header, and its cell from an agent's summary and its paired
difference with the strategy (None for the strategy itself)."""

SUMMARY_GROUPS: list[list[Column]] = [
    [("mean\nreturn", lambda s, _: pct_cell(s["return_mean"])),
     ("95% CI", lambda s, _: interval_cell(s["return_ci_low"], s["return_ci_high"]))],
    [("Brier\n(impl.,\npooled)", lambda s, _: num_cell(s["brier"])),
     ("Brier\n(paid)", lambda s, _: num_cell(s.get("brier_paid")))],
    [("BSS", lambda s, _: num_cell(s["bss"], "{:+.3f}")),
     ("BSS\nmkt", lambda s, _: num_cell(s["bss_market"], "{:+.3f}"))],
    [("win\nrate", lambda s, _: num_cell(s["win_rate"], "{:.1%}"))],
    [(f"{STRATEGY}\n− agent", lambda _, p: pct_cell(p["mean"]) if p else ""),
     ("its\n95% CI", lambda _, p: interval_cell(p["ci_low"], p["ci_high"]) if p else ""),
     ("sig.", lambda _, p: ("[green]✓[/]" if p["significant"] else "·") if p else "")],
]  # fmt: skip
"""The summary's columns in the groups that stay together when it is split to fit."""


def summary_table(data: dict[str, Any], width: int | None = None) -> RenderableType:
    """The strategy, then each agent it is compared with: the legend says so, not "ranked by
    return" as the leaderboard's does, and both Briers are shown as that legend names them
    (it explained a Brier (paid) the table did not have). In ``width`` cells the columns go in
    as many tables as keep every figure whole: at 80 columns the paired difference, the point
    of a backtest, was cut to "[-22.4…" and its header to "strate… − agent"."""

    def build(groups: Sequence[list[Column]]) -> Table:
        table = house_table(
            f"Over {len(data['cohorts'])} cohort(s): mean with 95% interval; paired = "
            f"{STRATEGY} − agent, cohort by cohort (✓: interval excludes 0)",
            f"{data['interval']['text']}. {SUMMARY_ORDER} · {SUMMARY_LEGEND}",
        )
        columns = [column for group in groups for column in group]
        table.add_column("agent", no_wrap=True)
        for name, _ in columns:
            table.add_column(name, justify="right", no_wrap=True)
        for name, s in data["summary"].items():
            cells = [cell(s, data["paired"].get(name)) for _, cell in columns]
            if any(cells):  # the strategy has no row among its paired differences
                table.add_row(name, *cells)
        return table

    return split_to_fit(build, SUMMARY_GROUPS, width)


@click.command()
@click.argument("strategy")
@cohort_options
@click.option(
    "--starts",
    help="Every Sunday 00:00 UTC in FROM..TO, one cohort each "
    "(default: every Sunday the tape offers a full universe).",
)
@click.option(
    "--against",
    default=",".join(DEFAULT_AGAINST),
    show_default=True,
    help="Comma-separated agent specs to compare with, each named by its kind (by its "
    "settings where two share a kind, e.g. sign-B_100), or NAME=SPEC.",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log to write (default: DIR/backtest.db with --report, else a temporary "
    "file removed after the run).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write DIR/index.html (tables, equity curves, reliability) and DIR/results.json.",
)
def backtest(
    strategy: str,
    cohort: CohortChoice,
    starts: str | None,
    against: str,
    db: Path | None,
    as_json: bool,
    report_dir: Path | None,
) -> None:
    """Backtest STRATEGY against baseline agents over many weekly cohorts.

    STRATEGY is an agent spec: a built-in or plugin name, module:Class or path/to/file.py:Class,
    with settings as a query string. It trades as "strategy"; each comparison agent trades
    under its kind, in the same cohorts. The same command gives the same numbers.

    \b
    Examples:
      arena backtest favourite
      arena backtest ./my.py:Mine --starts 2024-09-01..2024-10-27 --against hold,random
      arena backtest 'random?bets=4' --universe 50 --report out/ --json
      arena backtest sign --against 'hold,sign?B=100,sign?B=500' --engine ray
    """
    console = make_console(stderr=as_json)
    chosen = parse_starts(None, starts) if starts else None
    source = cohort.source
    comparison = [spec.strip() for spec in against.split(",") if spec.strip()]
    log = backtest_log(db, report_dir)  # kept where asked, else removed when the command ends
    click.get_current_context().call_on_close(log.remove)
    db = log.path
    shown = on_a_terminal(as_json=as_json)
    with plugins_print_to_stderr():
        plan = plan_backtest(strategy, comparison, source, chosen,
                             isolate=cohort.options.isolate, **cohort.settings)  # fmt: skip
        decisions = sum(p.plan.schedule.decisions * len(p.config.agents) for p in plan.planned)
        with (
            resumable(db) if log.kept else contextlib.nullcontext(),
            progress_of("backtesting", len(plan.cohorts), shown=shown, decisions=decisions) as work,
        ):
            result = run_backtest(
                plan, db, cohort.options, on_done=work.advance, on_decision=work.watcher
            )
    if result.note:
        click.echo(f"note: {result.note}", err=True)
    data = results_data(result)
    if report_dir is not None:
        try:
            write_backtest_report(report_dir, result, data)
        except OSError as exc:
            raise click.ClickException(f"{report_dir}: cannot write the report: {exc}") from None
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if plan.skipped:
        console.print(skipped_note(plan.skipped))
    console.print(cohort_table(data, console.width))
    console.print(summary_table(data, console.width))
    if data["beliefs"]:
        console.print(beliefs_table(data["beliefs"]))
    console.print(
        f"[dim]{STRATEGY} = {plan.strategy} · {len(plan.starts)} cohort(s), {log.note} · "
        f"tape {plan.source.tape.hash[:12]} · arena {data['package_version']}[/]"
    )
    console.print(f"digest [bold]{data['digest']}[/]")
    if report_dir is not None:
        console.print(f"report [bold]{report_dir / 'index.html'}[/]")
