"""The ``arena`` console script.

Commands live in ``arena.commands.*`` and are imported only when invoked, so ``arena --help``
and quick commands do not pay for numpy, httpx and friends they never use. ``arena --help``
lists every command without importing any: each one's one-line summary is kept here, and a
test checks that it is still the first line of the command's own help.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import importlib.util
import signal
import sys
from typing import NoReturn

import click

# command name -> "module:attribute" of its click command
COMMANDS: dict[str, str] = {
    "score": "arena.commands.score:score",
    "lab": "arena.commands.lab:lab",
    "diffusion": "arena.commands.diffusion:diffusion",
    "tapes": "arena.commands.tapes:tapes",
    "replay": "arena.commands.replay:replay",
    "report": "arena.commands.report:report",
    "verify": "arena.commands.verify:verify",
    "export": "arena.commands.export:export",
    "bench": "arena.commands.bench:bench",
    "step": "arena.commands.step:step",
    "backtest": "arena.commands.backtest:backtest",
    "sweep": "arena.commands.sweep:sweep",
    "ladder": "arena.commands.ladder:ladder",
    "strategies": "arena.commands.strategies:strategies",
    "strategy": "arena.commands.strategy:strategy",
    "cassette": "arena.commands.cassette:cassette",
    "llm": "arena.commands.llm:llm",
}

# command name -> the first paragraph of its help, as ``arena --help`` lists it
SUMMARIES: dict[str, str] = {
    "score": "Score resolved forecasts: Brier, log loss, ECE, Murphy, trading P/L and Kelly, "
    "and more when the file has the columns for it.",
    "lab": "forecastbench's synthetic experiments on parity markets, checked against theory.",
    "diffusion": "The market diffusion forecaster: train it on resolved markets, evaluate it on "
    "later ones.",
    "tapes": "Import, inspect and validate price tapes.",
    "replay": "Replay cohorts of a tape with trading agents into an event log.",
    "report": "The leaderboard across cohorts (mean return with a 95% interval that says how it "
    "was made, implied-confidence Brier and skill scores) and one line per cohort; for agents "
    "that ask a model, its calls, re-asks, failures, tokens, dollars and latency.",
    "verify": "Prove a log was not altered, cut or extended: hash chain, checking fold, "
    "recorded state digests, every snapshot, and the head.",
    "export": "Write a run's fills, positions, decisions, Brier rows and stated beliefs as "
    "CSV (and Parquet), a predictions file for 'arena score', and SQLite tables.",
    "bench": "Measure speed: ledger appends and reads, the replay peer workload, tapes, "
    "plugins, LLM agents, the lab, sweeps on local cores and Ray.",
    "step": "Step through a run one decision at a time: a finished log, or a replay as it runs.",
    "backtest": "Backtest STRATEGY against baseline agents over many weekly cohorts.",
    "sweep": "Sweep STRATEGY's settings over many weekly cohorts, against shared comparison "
    "agents.",
    "ladder": "Replay a run's own decisions under fa, mid, touch, l2, fees and latency: what "
    "the spread, the depth, the fee and the delay took from each agent.",
    "strategies": "List the built-in and installed strategies with their settings.",
    "strategy": "Work with strategy plugins.",
    "cassette": "Write every model question a log holds (each with all of its attempts) as a "
    "JSON Lines cassette.",
    "llm": "Language models for the llm agent and forecaster: serve one locally.",
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when that command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if _available(name))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _available(cmd_name):
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; a domain error (:func:`arena.errors.domain_errors`) ends as its
        first line, ``Error: ...`` and exit status 1, here, once, for every command.

        A command catches one itself only to word it differently (``verify --json`` answers in
        JSON). A Ctrl-C or an exit passes through without the roots being named: naming them
        imports ``strategies.llm.client`` and httpx (60 ms, after a replay's "interrupted: ..."
        line), in which a second Ctrl-C struck inside an import and printed a trace ("Exception
        ignored in ... _get_module_lock")."""
        from arena.errors import domain_errors

        try:
            return super().invoke(ctx)
        except Exception as exc:  # never a Ctrl-C or an exit (BaseException)
            if isinstance(exc, domain_errors()):
                raise click.ClickException(one_line(exc)) from None
            raise

    def _summary(self, ctx: click.Context, name: str, limit: int) -> str:
        """A command's line in the listing; one missing from ``SUMMARIES`` is imported to ask
        (slower, never wrong; the test names it)."""
        if name in SUMMARIES:
            return click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit)
        command = self.get_command(ctx, name)
        return command.get_short_help_str(limit) if command else ""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's listing, from ``SUMMARIES`` instead of importing every command."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, self._summary(ctx, name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (its class name if it has none): what a person
    reads on stderr, whatever a library packed below it."""
    from replays.untrusted import printable  # a tape's text in the message, shown not obeyed

    message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
    return printable(message.splitlines()[0]) if message.strip() else type(exc).__name__


def _available(name: str) -> bool:
    module_name = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(module_name) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="arena")
def cli() -> None:
    """arena: replay Polymarket tapes with trading agents, and score what they did.

    \b
    Example:
      arena replay                 # the embedded 2024 election sample, built-in agents
      arena report arena.db        # cash, P/L, Brier and the leaderboard of a run
    """


def main() -> None:
    """Entry point: every failure a user causes ends in one line on stderr and a non-zero exit.

    click would print its usage block above a usage error; the one line that says what was
    wrong is the part a person needs (``--help`` has the rest).
    """
    # a plugin's native code that crashes Python (a segfault) ends the process where no
    # Python can run to say so: the crash's own trace, with the plugin's line in it, is the
    # most that can be printed (under --isolate the crash is the agent's recorded error)
    with contextlib.suppress(OSError, ValueError):  # a stderr with no file (a test's) cannot
        faulthandler.enable()
    try:
        _run()
    except KeyboardInterrupt:  # a command's own, or one pressed while a failure was reported
        interrupted()
    finally:
        # the process is ending, however: a Ctrl-C now (a second press) would print a trace
        # from the interpreter's shutdown (multiprocessing's exit handlers), not stop anything
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def interrupted() -> NoReturn:
    """A Ctrl-C's end: exit status 130, as a shell gives one, and any further press ignored
    while the process ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(130)


def _run() -> None:
    """The command, every failure a user causes turned into one line and an exit status."""
    try:
        cli(standalone_mode=False)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"Error: {exc.format_message()}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click's word for a Ctrl-C
            interrupted()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C while the process ends
        click.echo("Aborted.", err=True)
        sys.exit(1)
