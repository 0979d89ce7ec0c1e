"""``arena bench``: the speed figures the issues ask for, measured, never asserted."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from arena.console import make_console


def _show(title: str, figures: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key, value in figures.items():
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        table.add_row(key, str(shown))
    make_console().print(table)


def _measured(
    title: str, work: Callable[[], dict[str, Any]], as_json: bool
) -> dict[str, Any] | None:
    """Run ``work`` under a spinner; with --json print its figures and return None, else
    return them for the command's own tables."""
    console = make_console(stderr=True)
    with console.status(f"measuring {title} …", spinner="dots"):
        figures = work()
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return None
    return figures


def _run(title: str, work: Callable[[], dict[str, Any]], as_json: bool) -> None:
    figures = _measured(title, work, as_json)
    if figures is not None:
        _show(title, figures, False)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group()
def bench() -> None:
    """Measure speed: ledger appends and reads, the replay peer workload, tapes, plugins, LLM
    agents, the lab, sweeps on local cores and Ray.

    \b
    Examples:
      arena bench replay --json
      arena bench ledger --events 1000000
      arena bench reads --events 1000000
    """


@bench.command()
@click.option("--events", type=int, default=1_000_000, show_default=True)
@click.option("--batch", type=int, default=50_000, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each measurement; the best is reported, and the median.")  # fmt: skip
@json_option
def ledger(events: int, batch: int, repeats: int, as_json: bool) -> None:
    """Append events to a fresh log in batches, then rebuild every projection from it.

    \b
    Example:
      arena bench ledger --events 1000000 --json
    """
    from arena.bench.ledger_bench import bench_append
    from arena.bench.rebuild_bench import bench_rebuild

    def work() -> dict[str, Any]:
        return {
            "append": bench_append(events, batch, repeats),
            "rebuild": bench_rebuild(events, repeats=repeats),
        }

    figures = _measured("the ledger", work, as_json)
    if figures is None:
        return
    _show("ledger append", figures["append"], False)
    _show("ledger rebuild", figures["rebuild"], False)


@bench.command()
@click.option("--events", type=int, default=1_000_000, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each measurement; the best is reported, and the median.")  # fmt: skip
@json_option
def reads(events: int, repeats: int, as_json: bool) -> None:
    """Read a closed log: report (snapshot restore + tail; and the whole command in a fresh
    process), verify (full checking fold + chain), rebuild; and what snapshots add to the log.

    \b
    Example:
      arena bench reads --events 1000000 --json
    """
    from arena.bench.reads_bench import bench_reads

    console = make_console(stderr=True)
    with console.status("measuring reads …", spinner="dots"):
        figures = bench_reads(events, repeats)
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    for name in ("report", "report_command", "verify", "rebuild", "snapshot"):
        _show(f"reads: {name}", figures[name], False)


@bench.command()
@click.option("--markets", type=click.IntRange(min=1), default=500, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=2_000, show_default=True)
@click.option("--seed", type=int, default=42, show_default=True,
              help="The tape's seed (42: the peers' tape).")  # fmt: skip
@click.option("--peers", "peer_scripts", type=click.Path(file_okay=False, path_type=Path),
              help="Also run the peers' scripts from this folder on the same tape "
              "(../shared/bench/peer-workload); print arena's speed over theirs.")  # fmt: skip
@click.option("--peer-python", default=sys.executable, show_default="this Python",
              help="The interpreter that has backtrader / nautilus_trader installed.")  # fmt: skip
@click.option(
    "--execution",
    default="fa",
    show_default=True,
    help="fa: the tape's price; any other model meets a 5-level book at every tick.",
)
@json_option
def replay(
    markets: int,
    steps: int,
    seed: int,
    peer_scripts: Path | None,
    peer_python: str,
    execution: str,
    as_json: bool,
) -> None:
    """The peers' workload: their tape (500 markets x 2,000 one-second steps, seed 42) and their
    band strategy, a decision every step, log included; the orders it placed (19,934: the
    peers' 19,944 less the tape's last step, where every market closes).

    \b
    Examples:
      arena bench replay --json
      arena bench replay --markets 50000        # peak memory at scale
      arena bench replay --peers ../shared/bench/peer-workload --peer-python ~/peers/bin/python
    """
    from arena.bench.replay_bench import bench_replay

    def work() -> dict[str, Any]:
        return bench_replay(
            markets, steps, seed, execution=execution, peer_scripts=peer_scripts,
            peer_python=peer_python,
        )  # fmt: skip

    figures = _measured("replay (peer workload)", work, as_json)
    if figures is None:
        return
    peers, notes = figures.pop("peers", {}), figures.pop("notes", [])
    _show("replay (peer workload)", figures, False)
    for name, theirs in peers.items():
        _show(f"{name} (same tape, same run)", theirs, False)
    for note in notes:
        click.echo(note)


@bench.command()
@click.option("--markets", default="5000,50000", show_default=True,
              help="Market counts, comma-separated; each runs in a fresh process.")  # fmt: skip
@click.option("--steps", type=click.IntRange(min=1), default=2_000, show_default=True)
@json_option
def scale(markets: str, steps: int, as_json: bool) -> None:
    """The peers' workload at several universe sizes: CPU-seconds, µs an event, peak memory,
    and the exponent the cost grows with in events (1: linear).

    \b
    Examples:
      arena bench scale                          # 5,000 and 50,000 markets x 2,000 steps
      arena bench scale --markets 5000,10000,20000 --json
    """
    from arena.bench.scale_bench import bench_scale

    try:
        sizes = [int(n) for n in markets.split(",")]
    except ValueError:
        raise click.BadParameter(f"{markets!r} is not market counts like 5000,50000") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{markets!r}: every market count must be at least 1")
    figures = _measured("scale (peer workload)", lambda: bench_scale(sizes, steps), as_json)
    if figures is None:
        return
    for run in figures["sizes"]:
        _show(f"{run['markets']:,} markets x {steps:,} steps", run, False)
    if "exponent" in figures:
        click.echo(f"growth exponent in events: {figures['exponent']} (1 is linear)")


@bench.command()
@click.option(
    "--settings",
    type=click.IntRange(1, 10),
    default=7,
    show_default=True,
    help="Settings of the sweep (each adds one cohort-run per start).",
)
@click.option(
    "--starts",
    type=click.IntRange(min=1),
    default=25,
    show_default=True,
    help="The sample's first full Sundays (7 settings + shared x 25 = 200 runs).",
)
@click.option("--jobs", type=int, default=0, help="Workers of either engine (default: cores).")
@json_option
def sweep(settings: int, starts: int, jobs: int, as_json: bool) -> None:
    """A sweep on --engine local and on --engine ray (a local Ray instance, started first):
    Ray's overhead; the cost of an extra setting with shared comparison agents; and the
    figures a 10,000-cohort-run sweep on 16 nodes is estimated from (README).

    \b
    Example:
      arena bench sweep --json
    """
    from arena.bench.sweep_bench import bench_sweep

    _run("sweep (local vs ray)", lambda: bench_sweep(settings, starts, jobs), as_json)


@bench.command()
@click.option("--markets", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--points", type=click.IntRange(min=2), default=100_000, show_default=True,
              help="Points per market, one every 10 minutes (a week: 1,008).")  # fmt: skip
@json_option
def history(markets: int, points: int, as_json: bool) -> None:
    """A windowed forecaster over a long replay: CPU per decision of extremized's spreads, early
    and late, reading only the window (what it does) and the whole history (what it did).

    \b
    Example:
      arena bench history --markets 50 --points 100000
    """
    from arena.bench.history_bench import bench_history

    _run("history reads (extremized spreads)", lambda: bench_history(markets, points), as_json)


@bench.command()
@click.option("--markets", type=int, default=500, show_default=True)
@click.option("--points", type=int, default=10_080, show_default=True,
              help="Points per market (10,080 = one week of minutes).")  # fmt: skip
@json_option
def tapes(markets: int, points: int, as_json: bool) -> None:
    """Load a columnar tape of N markets x P points in a fresh process: time and memory.

    \b
    Example:
      arena bench tapes --markets 500 --points 10080
    """
    from replays.synthetic import bench_tape_load

    _run("tape load", lambda: bench_tape_load(markets, points), as_json)


@bench.command()
@json_option
def strategies(as_json: bool) -> None:
    """Per-decision overhead of the plugin boundary at several universe sizes.

    \b
    Example:
      arena bench strategies --json
    """
    from arena.bench.strategies_bench import bench_strategies

    _run("plugin boundary", bench_strategies, as_json)


@bench.command()
@click.option("--jobs", type=int, default=0, help="Worker processes (default: CPU cores).")
@json_option
def cohorts(jobs: int, as_json: bool) -> None:
    """All 26 weekly cohorts of the embedded election sample with five non-LLM agents.

    \b
    Example:
      arena bench cohorts --jobs 2
    """
    from arena.bench.cohorts_bench import bench_cohorts

    _run("weekly cohorts", lambda: bench_cohorts(jobs), as_json)


@bench.command()
@click.option(
    "--base-url",
    default=None,
    help="An OpenAI-compatible endpoint (default: start the bundled SmolLM2 here).",
)
@click.option("--model", default=None, help="Model name sent to --base-url.")
@click.option(
    "--markets",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Top markets of the sample in the cohort.",
)
@click.option(
    "--decisions",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Decisions of each agent timed against the model.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="The llm agent's longest answer.",
)
@json_option
def llm(
    base_url: str | None,
    model: str | None,
    markets: int,
    decisions: int,
    max_tokens: int,
    as_json: bool,
) -> None:
    """The llm agent and forecaster against a local model: seconds per decision and per
    question, and their own overhead per call without the model (target under 5 ms).

    Needs the local-llm extra and the model unless --base-url is given.

    \b
    Examples:
      arena bench llm
      arena bench llm --base-url http://127.0.0.1:8080/v1 --decisions 4 --json
    """
    from arena.bench.llm_bench import bench_llm

    def work() -> dict[str, Any]:
        return bench_llm(
            base_url=base_url, model=model, markets=markets, decisions=decisions,
            max_tokens=max_tokens,
        )  # fmt: skip

    _run("llm agents (local model)", work, as_json)


@bench.command()
@click.option("--markets", type=int, default=500, show_default=True)
@click.option("--agents", type=int, default=20, show_default=True)
@click.option("--events", type=int, default=1_000_000, show_default=True,
              help="Events of the log stepped back through.")  # fmt: skip
@json_option
def step(markets: int, agents: int, events: int, as_json: bool) -> None:
    """arena step as a person meets it: opening a log, a key to the frame it draws (the real
    program on a pseudo-terminal), a live replay's next decision, and stepping back far.

    \b
    Example:
      arena bench step --json
    """
    from arena.bench.step_bench import bench_live, bench_redraw, bench_step_back

    def work() -> dict[str, Any]:
        return {
            "redraw": bench_redraw(markets, agents),
            "live": bench_live(),
            "step_back": bench_step_back(events),
        }

    figures = _measured("step", work, as_json)
    for name, part in (figures or {}).items():
        _show(f"step: {name}", _flat(part), False)


def _flat(figures: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figures as one table: ``key_to_screen cpu median_ms`` and so on."""
    flat: dict[str, Any] = {}
    for key, value in figures.items():
        name = f"{prefix} {key}".strip()
        if isinstance(value, dict):
            flat.update(_flat(value, name))
        else:
            flat[name] = value
    return flat


@bench.command()
@click.option(
    "--n",
    type=click.IntRange(min=1),
    default=50_000,
    show_default=True,
    help="Rows of the parity sample (the seed's default).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Runs of the experiment; the best is reported, and the median.",
)
@click.option(
    "--published",
    is_flag=True,
    help="Also forecastbench's largest published configurations (about a minute).",
)
@json_option
def lab(n: int, repeats: int, published: bool, as_json: bool) -> None:
    """`arena lab parity` at the seed's defaults: the experiment, and the whole command in a
    fresh process (target: under 10 s).

    \b
    Example:
      arena bench lab --json
    """
    from arena.bench.lab_bench import bench_lab

    _run("lab parity", lambda: bench_lab(n, repeats, published), as_json)


@bench.command(name="diffusion")
@click.option("--markets", type=click.IntRange(min=2), default=20_000, show_default=True,
              help="Synthetic resolved markets to train on (one row each).")  # fmt: skip
@click.option("--steps", type=click.IntRange(min=1), default=2_000, show_default=True,
              help="Training steps.")  # fmt: skip
@click.option("--batch", type=click.IntRange(min=1), default=256, show_default=True,
              help="Rows per training step.")  # fmt: skip
@click.option("--forecast-markets", type=click.IntRange(min=1), default=500, show_default=True,
              help="Markets forecast at once.")  # fmt: skip
@click.option("--mc", type=click.IntRange(min=1), default=16, show_default=True,
              help="Sampler runs per forecast.")  # fmt: skip
@click.option("--sample-steps", type=click.IntRange(2, 64), default=32, show_default=True,
              help="DDIM steps per sampler run.")  # fmt: skip
@json_option
def diffusion(
    markets: int, steps: int, batch: int, forecast_markets: int, mc: int, sample_steps: int,
    as_json: bool,
) -> None:  # fmt: skip
    """The market diffusion model: training on 20,000 markets for 2,000 steps of batch 256
    (target: under 2 minutes) and forecasting 500 markets to the precision of 16 bisection
    steps of 32-step sampler runs (target: under 1 s), in CPU and wall seconds.

    \b
    Example:
      arena bench diffusion --json
    """
    import arena.forecasting.lab  # noqa: F401  (one BLAS thread, where numpy is not loaded yet)
    from arena.bench.diffusion_bench import bench_diffusion

    figures = lambda: bench_diffusion(markets, steps, batch, forecast_markets, mc, sample_steps)  # noqa: E731
    _run("market diffusion", figures, as_json)


@bench.command(name="books")
@click.option("--lookups", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Random (token, instant) as-of lookups on the embedded sample.")  # fmt: skip
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The books_btc15m folder whose import is timed (../shared's).")  # fmt: skip
@click.option("--tokens", type=click.IntRange(min=2), default=50, show_default=True,
              help="Tokens of the large synthetic book file memory is measured on.")  # fmt: skip
@click.option("--snapshots", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Snapshots per token of that file.")  # fmt: skip
@click.option("--levels", type=click.IntRange(1, 40), default=10, show_default=True,
              help="Levels per side of each of its snapshots.")  # fmt: skip
@click.option("--touched", type=click.IntRange(min=1), default=2, show_default=True,
              help="Tokens whose books are looked up in that file.")  # fmt: skip
@json_option
def books(
    lookups: int, data: Path | None, tokens: int, snapshots: int, levels: int, touched: int,
    as_json: bool,
) -> None:  # fmt: skip
    """Order books as data: as-of lookups per CPU-second (target: 1 M), the bundled sample's
    import (target: under 2 s), and memory growing with the tokens touched, not the file.

    \b
    Examples:
      arena bench books --json
      arena bench books --tokens 200 --snapshots 20000   # a 1.3 GB file, two tokens touched
    """
    from arena.bench.books_bench import SHARED_BOOKS, bench_books

    def work() -> dict[str, Any]:
        return bench_books(
            lookups, data or SHARED_BOOKS, tokens, snapshots, levels, min(touched, tokens)
        )

    _run("order books", work, as_json)
