"""The domain errors: what a command may fail with that is the input's fault, not arena's.

There is no single class every package's errors derive from, because the import rules forbid
one: ``ledger`` and ``replays`` import nothing of each other or of the rest, so a shared base
would have to live in one of them and be imported by the other. Instead each package has one
root of its own, and ``arena`` — the one package that may import them all — names the set
here, once:

- ``ledger.errors.LedgerError``: a corrupt, foreign or altered log, a conflicting append, a
  snapshot that cannot be used (``IntegrityError``, ``ConcurrencyError``, ``SnapshotError``,
  ``MetricInputError`` are its children);
- ``replays.errors.TapeError``: an unusable tape or import source (``FetchError``);
- ``strategies.api.StrategyError``: a spec that cannot be built, a run a decision stopped
  (``RunStopped``); and ``strategies.llm.client.LLMError``, a model that cannot be asked at all
  (kept apart from ``StrategyError`` on purpose: the loader reports an agent whose constructor
  raises it as that agent's fault, naming it);
- :class:`ArenaError`: arena's own (cohort settings or run options that do not validate,
  ``arena.run.settings.SettingsError``; a backtest that cannot start; a local model server that
  cannot be run).

The CLI's edge (``arena.cli.LazyGroup.invoke``, through :func:`domain_errors`) turns any of
them into the one line ``Error: ...`` and exit status 1, so a command catches only what it
words differently.
"""

from __future__ import annotations


class ArenaError(Exception):
    """Bad input that only arena itself can judge; the message is the one line a user sees."""


def domain_errors() -> tuple[type[Exception], ...]:
    """Every root a command's failure may have; the CLI edge prints them as one line.

    Imported when asked, not with this module: ``ArenaError`` is raised by light modules
    (``arena.llm_server``) that should not pay for numpy and httpx to define it."""
    from ledger.errors import LedgerError
    from replays.errors import TapeError
    from strategies.api import StrategyError
    from strategies.llm.client import LLMError

    return (ArenaError, LedgerError, TapeError, StrategyError, LLMError)
