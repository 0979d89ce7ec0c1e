"""``arena sweep``: a strategy's settings over many cohorts, on local cores or a Ray cluster."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape

from arena.backtests.backtest import DEFAULT_AGAINST
from arena.backtests.sweep import (
    parse_grid,
    plan_sweep,
    read_sweep_file,
    results_data,
    run_sweep,
    selection_warning,
    settings_table,
)
from arena.boundary.isolated import isolation_notice
from arena.commands.options import CohortChoice, cohort_options, parse_starts
from arena.commands.replay import resumable, skipped_note
from arena.console import make_console, plugins_print_to_stderr
from arena.progress import on_a_terminal, progress_of

_FILE_TO_OPTION = {"decisions": "decision_cadence", "marks": "mark_cadence"}


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
            resumable(db),
            progress_of("sweeping", runs, unit="cohort-runs", shown=shown) as work,
        ):
            result = run_sweep(
                plan, db, cohort.options, on_done=work.advance, on_decision=work.watcher
            )
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
