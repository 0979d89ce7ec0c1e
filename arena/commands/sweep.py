"""``arena sweep``: a strategy's settings over many cohorts, on local cores or a Ray cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from arena.backtests.backtest import DEFAULT_AGAINST
from arena.backtests.sweep import (
    parse_grid,
    plan_sweep,
    read_sweep_file,
    results_data,
    run_sweep,
    selection_warning,
)
from arena.boundary.isolated import isolation_notice
from arena.commands.backtest import num_cell
from arena.commands.options import CohortChoice, cohort_options, parse_starts
from arena.commands.replay import resumable, skipped_note
from arena.console import make_console, plugins_print_to_stderr
from arena.progress import on_a_terminal, progress_of
from arena.reports.terminal import fit_names

_FILE_TO_OPTION = {"decisions": "decision_cadence", "marks": "mark_cadence"}


def _plus_minus(mean: float | None, low: float | None, high: float | None, fmt: str) -> str:
    """``mean ±half``: every interval here is symmetric (the estimate ± a t quantile times
    a standard error, ``ledger.intervals``), so the half-width says it in half the room."""
    if mean is None:
        return "—"
    text = fmt.format(mean)
    if low is None or high is None:
        return text
    return f"{text} ±{(high - low) / 2:{fmt[2:-1].lstrip('+')}}"


def _paired(pair: dict[str, Any]) -> str:
    mark = "[green]✓[/]" if pair["significant"] else "·"
    return f"{_plus_minus(pair['mean'], pair['ci_low'], pair['ci_high'], '{:+.2f}')} {mark}"


def settings_table(data: dict[str, Any], width: int | None = None) -> Table:
    """One row per setting (and per comparison agent): mean return, Brier, win rate, and the
    paired difference to each comparison agent; in ``width`` cells, the settings cut in the
    middle as the report cuts names (``fit_names``), since they differ at the end."""
    labels = {r["agent"]: " ".join(f"{k}={v}" for k, v in r["values"].items())
              for r in data["settings"]}  # fmt: skip
    return fit_names(list(labels.values()),
                     lambda cut: _settings_table(data, {a: cut[x] for a, x in labels.items()}),
                     width)  # fmt: skip


def _settings_table(data: dict[str, Any], labels: dict[str, str]) -> Table:
    against = list(data["plan"]["against"])
    best = data["selection"]["best"]
    table = Table(
        title=f"{len(data['settings'])} setting(s) × {len(data['plan']['starts'])} start(s): "
        "mean ± half its 95% interval; setting − agent in return points, paired start by "
        "start (✓: the interval excludes 0)",
        title_justify="left",
        caption=f"{data['interval']['text']}. Brier (impl.): the mean over cohorts of each "
        "cohort's implied-confidence Brier (bet / 25% of cash, against the result, over "
        "resolved bets); win rate and bets over all cohorts.",
        caption_justify="left",
        header_style="bold",
    )
    table.add_column("setting", no_wrap=True)
    for name in ["return %", "Brier (impl.)", "win rate", "bets"]:
        table.add_column(name, justify="right", no_wrap=True)
    for name in against:
        table.add_column(f"− {name}", justify="right", no_wrap=True)

    def cells(row: dict[str, Any]) -> list[str]:
        return [
            _plus_minus(row["return_mean"], row["return_ci_low"], row["return_ci_high"],
                        "{:+.2f}"),
            _plus_minus(row["brier_mean"], row["brier_ci_low"], row["brier_ci_high"], "{:.3f}"),
            num_cell(row["win_rate"], "{:.1%}"),
            str(row["n_bets"]),
        ]  # fmt: skip

    for row in data["settings"]:
        label = labels[row["agent"]]
        star = " [bold]★[/]" if row["agent"] == best else ""
        paired = [_paired(row["paired"][a]) for a in against]
        table.add_row(escape(label) + star, *cells(row), *paired)
    for row in data["comparison"]:
        table.add_row(f"[dim]{escape(row['agent'])}[/]", *cells(row), *("" for _ in against))
    return table


@click.command()
@click.argument("strategy", required=False)
@click.option("--grid", help="Settings to sweep: 'KEY=V1,V2;KEY2=V1,V2' (every combination).")
@click.option(
    "--file",
    "sweep_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TOML sweep file: strategy, [grid], against, starts, cohort settings.",
)
@cohort_options
@click.option("--starts", help="Every Sunday 00:00 UTC in FROM..TO (default: every full one).")
@click.option(
    "--against",
    help="Comma-separated comparison agents, replayed once per start and shared by every "
    f"setting (default: {','.join(DEFAULT_AGAINST)}); NAME=SPEC to name one.",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("sweep.db"),
    show_default=True,
    help="Event log; run again on it to resume (only missing cohorts run).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def sweep(
    ctx: click.Context,
    /,
    strategy: str | None,
    grid: str | None,
    sweep_file: Path | None,
    cohort: CohortChoice,
    starts: str | None,
    against: str | None,
    db: Path,
    as_json: bool,
) -> None:
    """Sweep STRATEGY's settings over many weekly cohorts, against shared comparison agents.

    Every combination of the grid runs in every cohort; the comparison agents run once per
    start and every setting is paired with them start by start. A sweep started again on the
    same --db runs only what is missing. The same command gives the same log and numbers on
    --engine local and --engine ray.

    \b
    Examples:
      arena sweep sign --grid 'B=100,500;min_edge=0,0.02' --starts 2024-06-02..2024-09-29
      arena sweep --file sweep.toml --engine ray --address auto
      arena sweep linear --grid 'B=500,1000,2000' --against hold,favourite --json
    """
    console = make_console(stderr=as_json)
    from_file = read_sweep_file(sweep_file) if sweep_file else None
    settings = dict(cohort.settings)
    if from_file:
        strategy = strategy or from_file.strategy
        starts = starts or from_file.starts
        for key, value in from_file.cohort.items():
            field = _FILE_TO_OPTION.get(key, key)
            if ctx.get_parameter_source(field) != click.core.ParameterSource.COMMANDLINE:
                settings[field] = value
    if not strategy:
        raise click.ClickException("name a STRATEGY (or strategy = ... in the --file)")
    if grid:
        grid_of = parse_grid(grid)
    elif from_file:
        grid_of = from_file.grid
    else:
        raise click.ClickException("give --grid 'KEY=V1,V2;...' or a --file with a [grid]")
    if against is not None:
        vs = [spec.strip() for spec in against.split(",") if spec.strip()]
    elif from_file and from_file.against is not None:
        vs = list(from_file.against)
    else:
        vs = list(DEFAULT_AGAINST)
    source = cohort.source
    chosen = parse_starts(None, starts) if starts else None
    shown = on_a_terminal(as_json=as_json)
    with plugins_print_to_stderr():
        plan = plan_sweep(strategy, grid_of, vs, source, chosen,
                          isolate=cohort.options.isolate, **settings)  # fmt: skip
        if (notice := isolation_notice(cohort.options.isolate)) is not None:
            click.echo(notice, err=True)
        runs = len(plan.cohorts())
        with (
            progress_of("sweeping", runs, unit="cohort-runs", shown=shown) as work,
            resumable(db),
        ):
            result = run_sweep(plan, db, cohort.options, on_done=work.advance)
    data = results_data(result)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if plan.skipped:
        console.print(skipped_note(plan.skipped))
    console.print(settings_table(data, console.width))
    console.print(f"[yellow]{escape(selection_warning(data))}[/]")
    ran = data["cohort_runs"] - data["reused"]
    console.print(
        f"[dim]{data['cohort_runs']} cohort-run(s) ({ran} run now, {data['reused']} already "
        f"in the log) on {cohort.options.engine} in {db} · tape {plan.source.tape.hash[:12]} · "
        f"arena {data['package_version']}[/]"
    )
    console.print(f"digest [bold]{data['digest']}[/]")
