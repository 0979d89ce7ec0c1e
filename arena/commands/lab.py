"""``arena lab``: forecastbench's synthetic experiments, each checked against its analytic facts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.table import Table

from arena.console import make_console
from arena.forecasting.lab.experiments import (
    LLM_MAX_EXAMPLES,
    GroupStressConfig,
    IntrinsicPostConfig,
    ParityConfig,
    run_groupstress,
    run_intrinsic_post,
    run_parity,
)
from arena.forecasting.lab.options import build, config_options
from arena.forecasting.lab.progress import Advance, Progress, Silent
from arena.forecasting.lab.result import LabResult
from arena.forecasting.lab.training import (
    DiffTrainConfig,
    SimplexConfig,
    run_difftrain,
    run_difftrain_simplex,
)
from arena.progress import on_a_terminal

TOP_J_SHOWN = 5
METRICS = ("brier", "logloss", "sce", "ece", "arb", "gcal_S", "max_other_J", "final_loss")


class Bar:
    """A rich progress bar on stderr, one line per stage, gone when the run ends."""

    def __init__(self, progress: RichProgress) -> None:
        self._progress = progress

    def stage(self, description: str, total: int) -> Advance:
        task = self._progress.add_task(description, total=total, status="")

        def advance(n: int, status: str = "") -> None:
            self._progress.update(task, advance=n, status=status)

        return advance


def _execute(run: Callable[[Progress], LabResult], as_json: bool, quiet: bool) -> LabResult:
    try:
        if quiet or not on_a_terminal(as_json=as_json):
            return run(Silent())
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
        )
        with RichProgress(*columns, console=make_console(stderr=True), transient=True) as bar:
            return run(Bar(bar))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _show(result: LabResult, as_json: bool, check: bool) -> None:
    console = make_console()
    if as_json:
        click.echo(json.dumps(result.as_json(), indent=2))
    else:
        console.print(_models_table(result))
        if "top_J" in result.extra:
            console.print(_top_j_table(result.extra["top_J"]))
        console.print(_checks_table(result))
    if check and not all(c.ok for c in result.checks if c.kind != "claim"):
        raise click.ClickException("an analytic fact failed its check (see the table)")


def _models_table(result: LabResult) -> Table:
    shown = [m for m in METRICS if any(m in metrics for metrics in result.models.values())]
    config = ", ".join(
        f"{k}={v}"
        for k, v in result.config.items()
        if v is not None and not isinstance(v, list | dict)
    )
    table = Table(title=f"arena lab {result.experiment}", caption=config)
    table.add_column("model", style="bold")
    table.add_column("n", justify="right")
    for metric in shown:
        table.add_column(metric, justify="right")
    for name, metrics in result.models.items():
        cells = [f"{metrics[m]:.6f}" if m in metrics else "" for m in shown]
        table.add_row(name, f"{int(metrics.get('n', 0)):,}" if "n" in metrics else "", *cells)
    return table


def _top_j_table(top_j: dict[str, list[dict[str, Any]]]) -> Table:
    table = Table(title="worst subcube biases, by J")
    table.add_column("model", style="bold")
    table.add_column("J", no_wrap=True)
    table.add_column(escape("max_a |E[f − q | z_J = a]|"), justify="right")
    for model, top in top_j.items():
        for rank, row in enumerate(top[:TOP_J_SHOWN]):
            table.add_row(model if rank == 0 else "", str(tuple(row["J"])),
                          f"{row['max_abs_bias']:.6f}")  # fmt: skip
    return table


def _checks_table(result: LabResult) -> Table:
    table = Table(title="analytic facts")
    for name in ("fact", "measured", "expected", "tolerance", "basis", "ok"):
        table.add_column(name, justify="left" if name in ("fact", "basis") else "right")
    for c in result.checks:
        tolerance = "below" if c.kind == "claim" else f"± {c.tolerance:.3g}"
        mark = "[green]✓[/]" if c.ok else ("[yellow]✗[/]" if c.kind == "claim" else "[red]✗[/]")
        table.add_row(c.name, f"{c.measured:.6g}", f"{c.expected:.6g}", tolerance, c.basis, mark)
    return table


common = (
    click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    click.option("--quiet", is_flag=True, help="No progress bar."),
    click.option("--check", is_flag=True,
                 help="Exit 1 if an analytic fact fails (claims such as 'beats ½' only warn)."),
)  # fmt: skip
llm_options = (
    click.option("--llm", "llm_model", default=None, metavar="MODEL",
                 help="Also ask this chat model (the forecaster=llm connection, ARENA_LLM_*)."),
    click.option("--llm-encoding", type=click.Choice(["plain", "natural"]), default="natural",
                 show_default=True, help="How the bits are written for the model."),
    click.option("--llm-max-examples", type=click.IntRange(min=1), default=LLM_MAX_EXAMPLES,
                 show_default=True, help="Rows the model is asked about (the first ones)."),
)  # fmt: skip


def _with(options: tuple[Callable[[Any], Any], ...]) -> Callable[[Any], Any]:
    def decorate(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _llm(kwargs: dict[str, Any]) -> Any:
    model = kwargs.get("llm_model")
    if model is None:
        return None
    from arena.forecasting.lab.llm import LLMBits
    from strategies.api import StrategyError

    try:
        return LLMBits(model, kwargs["llm_encoding"], kwargs["llm_max_examples"])
    except StrategyError as exc:
        raise click.ClickException(str(exc)) from None


def _config(config: type, kwargs: dict[str, Any]) -> Any:
    try:
        return build(config, kwargs)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def lab() -> None:
    """forecastbench's synthetic experiments on parity markets, checked against theory.

    Each prints every model's Brier, log loss, SCE (against the known truth f), ECE and the
    bounded trader's profit, then the seed's analytic facts with the tolerance the sampling
    allows. Defaults are the seed's.

    \b
    Examples:
      arena lab parity
      arena lab groupstress --exact --json
      arena lab difftrain --steps 500 --d 8 --k 3
    """


@lab.command()
@config_options(ParityConfig)
@_with(llm_options)
@_with(common)
def parity(as_json: bool, quiet: bool, check: bool, **kwargs: Any) -> None:
    """Oracle, constant ½, analytic diffusion q_rho and the L-query surrogate on a parity
    market: the cliff (AR fails outright when L < k) against the fog (diffusion is off by
    (alpha/2)(1 - rho^k) everywhere).

    \b
    Example:
      arena lab parity --n 200000 --rho 0.9 --json
    """
    cfg, llm = build(ParityConfig, kwargs), _llm(kwargs)
    _show(_execute(lambda p: run_parity(cfg, p, llm), as_json, quiet), as_json, check)


@lab.command()
@config_options(GroupStressConfig)
@_with(common)
def groupstress(as_json: bool, quiet: bool, check: bool, **kwargs: Any) -> None:
    """Worst subcube bias max_a |E[f - q | z_J = a]| for every J of size k: only J = S is
    biased, by (alpha/2)(1 - rho^k) for diffusion and alpha/2 for an AR model with L < k.

    \b
    Example:
      arena lab groupstress --exact
    """
    cfg = build(GroupStressConfig, kwargs)
    _show(_execute(lambda p: run_groupstress(cfg, p), as_json, quiet), as_json, check)


@lab.command("intrinsic-post")
@config_options(IntrinsicPostConfig)
@_with(llm_options)
@_with(common)
def intrinsic_post(as_json: bool, quiet: bool, check: bool, **kwargs: Any) -> None:
    """AR and diffusion as they are, and through a group-bin post-processor fitted on the
    2^k subcubes of the true S: it fixes what it has seen enough of, at a sample tax.

    \b
    Example:
      arena lab intrinsic-post --n-train 5000
    """
    cfg, llm = build(IntrinsicPostConfig, kwargs), _llm(kwargs)
    _show(_execute(lambda p: run_intrinsic_post(cfg, p, llm), as_json, quiet), as_json, check)


@lab.command()
@config_options(DiffTrainConfig)
@_with(common)
def difftrain(as_json: bool, quiet: bool, check: bool, **kwargs: Any) -> None:
    """Train the logit diffusion model on f's logit and score it against the truth
    (defaults: the seed's; about 3 minutes on a busy 2-core machine).

    \b
    Example:
      arena lab difftrain --d 8 --k 2 --steps 400 --batch 64 --hidden 64 --lr 1e-3
    """
    cfg = _config(DiffTrainConfig, kwargs)
    _show(_execute(lambda p: run_difftrain(cfg, p), as_json, quiet), as_json, check)


@lab.command("difftrain-simplex")
@config_options(SimplexConfig)
@_with(common)
def difftrain_simplex(as_json: bool, quiet: bool, check: bool, **kwargs: Any) -> None:
    """Train the diffusion model in ALR coordinates on an m-outcome parity market; multi-class
    Brier, log loss, SCE and top-label ECE (15 bins).

    \b
    Example:
      arena lab difftrain-simplex --m 3 --d 8 --k 2 --steps 400 --hidden 64 --lr 1e-3
    """
    cfg = _config(SimplexConfig, kwargs)
    _show(_execute(lambda p: run_difftrain_simplex(cfg, p), as_json, quiet), as_json, check)
