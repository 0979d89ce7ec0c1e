"""The Murphy decomposition computed by SQLite, next to the rows it scores.

K-Fish keeps a numpy and a SQL version "so the warehouse and the tests compute identical
numbers" (origins §3.1); we do the same so a report can score Brier rows straight from the event
log's view without loading them into Python. The SQL bins exactly as ``np.digitize`` does: it
builds the same edges (``i * (1.0 / bins)``, the last one 1.0, as ``np.linspace`` makes them)
and counts the edges below each forecast, so a forecast sitting on an edge lands in the same bin
here as in :func:`ledger.metrics.murphy`. Only the summation order differs.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from ledger.metrics import (
    MURPHY_BINS,
    BinStats,
    MetricInputError,
    Murphy,
    bin_edges,
    murphy_from_bins,
)

# digitize(right=True) counts edges strictly below q; digitize(right=False) counts edges <= q.
_EDGE_TEST = {True: "e.edge < r.prob", False: "e.edge <= r.prob"}

_QUERY = """
WITH RECURSIVE
  edges(i, edge) AS (
    SELECT 0, 0.0
    UNION ALL
    SELECT i + 1, CASE WHEN i + 1 = :bins THEN 1.0 ELSE (i + 1) * (1.0 / :bins) END
    FROM edges WHERE i < :bins
  ),
  r AS (SELECT CAST({prob} AS REAL) AS prob, CAST({outcome} AS REAL) AS outcome FROM {source}),
  binned AS (
    SELECT max(0, min(:bins - 1,
             (SELECT count(*) FROM edges AS e WHERE {edge_test}) - 1)) AS bin,
           prob, outcome
    FROM r
  )
SELECT bin, count(*), sum(prob), sum(outcome), sum((prob - outcome) * (prob - outcome))
FROM binned GROUP BY bin ORDER BY bin
"""

_CHECK = """
SELECT count(*),
       sum({prob} IS NULL OR typeof({prob}) NOT IN ('integer', 'real')
           OR {prob} < 0 OR {prob} > 1),
       sum({outcome} IS NULL OR {outcome} NOT IN (0, 1))
FROM {source}
"""


def quote_identifier(name: str) -> str:
    """A column or table name as a SQL identifier, so odd names cannot break the query."""
    return '"' + name.replace('"', '""') + '"'


def _source_sql(source: str) -> str:
    """A parenthesised subquery is used as is; anything else is a table/view name. Either way it
    is aliased ``src`` so columns can be qualified: SQLite reads an unknown *unqualified*
    double-quoted name as a string literal, which would score the text "prob" instead of failing.
    """
    stripped = source.strip()
    if stripped.startswith("(") and stripped.endswith(")"):
        return stripped + " AS src"
    return quote_identifier(source) + " AS src"


def murphy_sql(
    conn: sqlite3.Connection,
    source: str,
    prob_col: str = "prob",
    outcome_col: str = "outcome",
    bins: int = MURPHY_BINS,
    right_closed: bool = False,
) -> Murphy:
    """REL, RES, UNC and the true Brier of ``prob_col`` against ``outcome_col`` over ``source``
    (a table or view name, or a parenthesised ``(SELECT ...)``), binned as in numpy.

    Rows are checked first: a NULL or non-numeric probability, one outside [0, 1], or an
    outcome other than 0/1 raises :class:`MetricInputError` rather than skewing the result.
    """
    edges = bin_edges(bins)
    names = {
        "prob": "src." + quote_identifier(prob_col),
        "outcome": "src." + quote_identifier(outcome_col),
        "source": _source_sql(source),
    }
    try:
        total, bad_prob, bad_outcome = conn.execute(_CHECK.format(**names)).fetchone()
        if total == 0:
            raise MetricInputError(f"{source}: no rows to score")
        if bad_prob:
            raise MetricInputError(
                f"{source}: {bad_prob} row(s) with {prob_col} null, non-numeric or outside [0, 1]"
            )
        if bad_outcome:
            raise MetricInputError(f"{source}: {bad_outcome} row(s) with {outcome_col} not 0/1")
        query = _QUERY.format(edge_test=_EDGE_TEST[right_closed], **names)
        rows = conn.execute(query, {"bins": bins}).fetchall()
    except sqlite3.Error as exc:
        raise MetricInputError(f"{source}: cannot read {prob_col}/{outcome_col}: {exc}") from None
    count = np.zeros(bins, dtype=np.int64)
    sum_forecast = np.zeros(bins)
    sum_outcome = np.zeros(bins)
    squared_error = 0.0
    for bin_, n, sum_p, sum_o, sum_sq in rows:
        count[bin_], sum_forecast[bin_], sum_outcome[bin_] = n, sum_p, sum_o
        squared_error += sum_sq
    stats = BinStats(edges[:-1], edges[1:], count, sum_forecast, sum_outcome)
    return murphy_from_bins(stats, squared_error / int(total))


BRIER_ROWS_SQL = """(
    SELECT f.stream AS cohort,
           f.payload ->> '$.agent' AS agent,
           f.payload ->> '$.confidence' AS prob,
           upper(f.payload ->> '$.side') = upper(r.payload ->> '$.winner') AS outcome
    FROM events_view AS f
    JOIN events_view AS r
      ON r.stream = f.stream
     AND r.type = 'MarketResolved'
     AND r.payload ->> '$.market' = f.payload ->> '$.market'
    WHERE f.type = 'OrderFilled' AND f.payload ->> '$.kind' = 'buy'
)"""
"""The implied-confidence Brier rows of an event log, straight from its events: one row per
filled buy on a resolved market (voided markets have no ``MarketResolved``, so no row), the
confidence in the traded side against whether that side won, matched case-insensitively as
settlement matches it."""


def log_murphy_sql(
    conn: sqlite3.Connection,
    *,
    agent: str | None = None,
    bins: int = MURPHY_BINS,
    right_closed: bool = False,
) -> Murphy:
    """Murphy decomposition of an event log's Brier rows (one agent's, or everyone's), computed
    entirely in SQLite: the warehouse-side twin of ``murphy`` over the folded projections."""
    source = BRIER_ROWS_SQL
    if agent is not None:
        source = f"(SELECT * FROM {BRIER_ROWS_SQL} WHERE agent = {_literal(agent)})"
    return murphy_sql(conn, source, bins=bins, right_closed=right_closed)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
