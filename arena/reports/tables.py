"""A run's read models as plain columns: what ``arena export`` writes and ``arena.open_run``
hands to a notebook.

Every table is folded from the log through the checked read of ``ledger.restore`` (positions
and Brier rows from the restored state), or read from the events themselves (fills and
decisions), so an export says exactly what ``arena report`` says. Each table is a
:class:`Columns`: named columns of builtin values in a fixed order, which a CSV writer, Arrow,
numpy, pandas and SQLite all take without another copy of the logic.

The tables (one row each per):

* ``fills``: ``OrderFilled`` event (buys and sells), with its seq in the log;
* ``decisions``: ``DecisionMade`` event, with the first line of its error if it failed;
* ``positions``: position still open at the end of the log, marked at its latest price;
* ``brier``: scored buy (implied confidence against the result; methodology §1.9);
* ``beliefs``: scored buy whose strategy stated a probability;
* ``predictions``: the same stated probabilities in the shape ``arena score`` reads: ``y`` (did
  the side bought win), ``pred_prob`` (the stated probability that it would), ``market_prob``
  (the side's price when bought), and ``id``, ``cohort``, ``agent``, ``side``, ``forecast_ts``
  to group by.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arena.reports.model import iso_utc, open_positions
from ledger.errors import IntegrityError, LedgerError
from ledger.events import AnyEvent, DecisionMade, OrderFilled
from ledger.restore import Loaded, check_log, check_stream, load
from ledger.store import EventStore

TABLES = ("fills", "decisions", "positions", "brier", "beliefs", "predictions")

TEXT, INT, REAL = str, int, float
_FILL_COLUMNS = {
    "cohort": TEXT,
    "seq": INT,
    "ts": INT,
    "time": TEXT,
    "agent": TEXT,
    "order_id": TEXT,
    "kind": TEXT,
    "market": TEXT,
    "side": TEXT,
    "position_id": TEXT,
    "price": REAL,
    "shares": REAL,
    "amount": REAL,
    "cash_before": REAL,
    "confidence": REAL,
    "belief": REAL,
    "cost_basis": REAL,
    "realized": REAL,
}
_DECISION_COLUMNS = {
    "cohort": TEXT,
    "seq": INT,
    "ts": INT,
    "time": TEXT,
    "agent": TEXT,
    "week": INT,
    "action": TEXT,
    "bets": INT,
    "sells": INT,
    "reasoning": TEXT,
    "model": TEXT,
    "tokens_in": INT,
    "tokens_out": INT,
    "cost": REAL,
    "latency_ms": REAL,
    "retries": INT,
    "error": TEXT,
}
_POSITION_COLUMNS = {
    "cohort": TEXT,
    "agent": TEXT,
    "position_id": TEXT,
    "market": TEXT,
    "side": TEXT,
    "shares": REAL,
    "cost": REAL,
    "avg_entry": REAL,
    "price": REAL,
    "value": REAL,
    "unrealized_pnl": REAL,
}
_BRIER_COLUMNS = {
    "cohort": TEXT,
    "agent": TEXT,
    "order_id": TEXT,
    "market": TEXT,
    "side": TEXT,
    "confidence": REAL,
    "won": INT,
    "brier": REAL,
    "price": REAL,
    "belief": REAL,
}
_BELIEF_COLUMNS = {
    "cohort": TEXT,
    "agent": TEXT,
    "order_id": TEXT,
    "market": TEXT,
    "side": TEXT,
    "belief": REAL,
    "won": INT,
    "price": REAL,
}
_PREDICTION_COLUMNS = {
    "id": TEXT,
    "cohort": TEXT,
    "agent": TEXT,
    "side": TEXT,
    "forecast_ts": INT,
    "market_prob": REAL,
    "pred_prob": REAL,
    "y": INT,
}


@dataclass
class Columns:
    """One table: typed columns and, per row, a tuple of builtin values in their order (None
    where a value is missing)."""

    types: dict[str, type]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.types)

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[Any]:
        k = self.names.index(name)
        return [row[k] for row in self.rows]

    def dicts(self) -> Iterator[dict[str, Any]]:
        for row in self.rows:
            yield dict(zip(self.names, row, strict=True))

    def to_numpy(self) -> dict[str, np.ndarray]:
        """``{column: array}``: floats as float64 (a missing one is NaN), integers as int64
        (float64 with NaN if one is missing), text as object arrays."""
        return {name: _array(self.column(name), kind) for name, kind in self.types.items()}

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` (needs the ``parquet`` extra: ``pip install 'arena[parquet]'``)."""
        pa = optional("pyarrow", "parquet")
        arrow_type = {TEXT: pa.string(), INT: pa.int64(), REAL: pa.float64()}
        return pa.table({
            name: pa.array(self.column(name), type=arrow_type[kind])
            for name, kind in self.types.items()
        })  # fmt: skip

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame``, if pandas is installed."""
        pd = optional("pandas", "pandas")
        return pd.DataFrame.from_records(self.rows, columns=list(self.names))


def optional(module: str, extra: str) -> Any:
    """An optional library, or a one-line LedgerError saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        name = module.partition(".")[0]
        hint = f"pip install 'arena[{extra}]'" if extra != name else f"pip install {name}"
        raise LedgerError(f"this needs {name}, which is not installed ({hint})") from None


def _array(values: list[Any], kind: type) -> np.ndarray:
    if kind is TEXT:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    if kind is INT and None not in values:
        return np.array(values, dtype=np.int64)
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


@dataclass
class RunTables:
    """Every table of a run, and how its state was read (for a note when it was not clean)."""

    tables: dict[str, Columns]
    loaded: Loaded


def read_tables(store: EventStore, cohorts: Sequence[str] | None = None) -> RunTables:
    """Every table of the given cohorts (all by default), checked on the way: the state through
    ``ledger.restore.load`` (proven to end where the chain ends) and every event read for
    fills and decisions through its chain links and the order the stream index gives them
    (``ledger.restore.check_stream``; IntegrityError naming the first bad seq)."""
    check_log(store)  # a cohort missing from a damaged index is not "no such cohort"
    names = store.streams() if cohorts is None else list(cohorts)
    unknown = sorted(set(names) - set(store.streams()))
    if unknown:
        raise LedgerError(f"{store.path} has no cohort {unknown[0]}")
    loaded = load(store, names)
    fills, decisions = Columns(_FILL_COLUMNS), Columns(_DECISION_COLUMNS)
    for name in names:
        end = loaded.ends.get(name)
        check_stream(store, name, 0, end)
        for seq, e in _in_order(store, name, end.version if end else 0):
            if isinstance(e, OrderFilled):
                fills.rows.append((
                    e.cohort, seq, e.ts, iso_utc(e.ts), e.agent, e.order_id, e.kind, e.market,
                    e.side, e.position_id, e.price, e.shares, e.amount, e.cash_before,
                    e.confidence, e.belief, e.cost_basis, e.realized,
                ))  # fmt: skip
            elif isinstance(e, DecisionMade):
                error = e.error.splitlines()[0] if e.error else None
                decisions.rows.append((
                    e.cohort, seq, e.ts, iso_utc(e.ts), e.agent, e.week, e.action, len(e.bets),
                    len(e.sells), e.reasoning, e.model, e.tokens_in, e.tokens_out, e.cost,
                    e.latency_ms, e.retries, error,
                ))  # fmt: skip
    states = [loaded.ledger.cohorts[name] for name in names if name in loaded.ledger.cohorts]
    positions = Columns(_POSITION_COLUMNS)
    brier, beliefs = Columns(_BRIER_COLUMNS), Columns(_BELIEF_COLUMNS)
    predictions = Columns(_PREDICTION_COLUMNS)
    for state in states:
        for p in open_positions(state):
            positions.rows.append((state.cohort, *(p[c] for c in list(_POSITION_COLUMNS)[1:])))
        bought = _buy_times(fills, state.cohort)
        for agent, book in state.books.items():
            for r in book.brier_rows:
                brier.rows.append((
                    state.cohort, agent, r.order_id, r.market, r.side, r.confidence, r.won,
                    r.brier, r.price, r.belief,
                ))  # fmt: skip
                if r.belief is None:
                    continue
                beliefs.rows.append((
                    state.cohort, agent, r.order_id, r.market, r.side, r.belief, r.won, r.price,
                ))  # fmt: skip
                predictions.rows.append((
                    r.market, state.cohort, agent, r.side, bought.get((agent, r.order_id)),
                    r.price, r.belief, r.won,
                ))  # fmt: skip
    tables = {
        "fills": fills,
        "decisions": decisions,
        "positions": positions,
        "brier": brier,
        "beliefs": beliefs,
        "predictions": predictions,
    }
    return RunTables(tables, loaded)


def _in_order(store: EventStore, name: str, last: int) -> Iterator[tuple[int, AnyEvent]]:
    """``(seq, event)`` of the stream's events as the stream index hands them out, each held
    to be the stream's next version, later in the log than the one before, and of its cohort,
    and no more of them than its proven ``last`` version: a damaged index ends the read with
    one line (it once wrote twice the fills, or read one stream for ever)."""
    version = before = 0
    rows = store.read_with_seq(name)
    while True:
        try:
            seq, stream, at, event = next(rows)
        except StopIteration:
            break
        except (KeyError, TypeError):  # an entry whose stream or version is not a number
            raise IntegrityError(
                f"{store.path}: a read of {name} by its index meets a damaged entry after its "
                f"version {version} (the SQLite file is damaged)"
            ) from None
        if (stream, at, event.cohort) != (name, version + 1, name) or not before < seq or at > last:
            raise IntegrityError(
                f"{store.path}: a read of {name} by its index meets event {seq} as its version "
                f"{at} after version {version} (the SQLite file is damaged)",
                seq if isinstance(seq, int) else None,
            )
        version, before = at, seq
        yield seq, event
    if version != last:
        raise IntegrityError(
            f"{store.path}: a read of {name} by its index ends at its version {version}, not "
            f"at {last} (the SQLite file is damaged)"
        )


def _buy_times(fills: Columns, cohort: str) -> dict[tuple[str, str], int]:
    """When each buy of a cohort filled, by ``(agent, order_id)``: a prediction's instant."""
    k = {name: fills.names.index(name) for name in ("cohort", "agent", "order_id", "ts")}
    return {
        (row[k["agent"]], row[k["order_id"]]): row[k["ts"]]
        for row in fills.rows
        if row[k["cohort"]] == cohort
    }


def cells(values: Iterable[Any]) -> list[str]:
    """A row as CSV cells: None is empty, floats by their shortest exact repr."""
    return ["" if v is None else repr(v) if isinstance(v, float) else str(v) for v in values]
