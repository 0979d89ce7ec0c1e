"""Reports as one self-contained HTML page: tables, equity curves and reliability diagrams.

Two pages share every part here: any replay's (``arena report DB --html``, built here) and a
backtest's (``arena backtest --report``, built by ``arena.backtests.page`` from these parts). A
page links nothing (no scripts, fonts or stylesheets from elsewhere), so it opens offline
years later exactly as it was written and can be mailed or archived as a single file next to
its JSON. Every table says which Brier and which interval it shows, and the settings table
holds what it takes to run the same thing again.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from arena.reports.charts import (
    PALETTE,
    RELIABILITY_BINS,
    agent_equity,
    equity_chart,
    figure,
    reliability_chart,
)
from arena.reports.coverage import Coverage
from arena.reports.equity import CohortRecord, fold_cohort, mean_equity
from arena.reports.model import (
    BRIER_IMPLIED,
    MARK,
    MARK_LEGEND,
    IntervalSettings,
    Usage,
    board_heading,
    interval_hint,
    misleading_briers,
    report_data,
    returns_by_agent,
    scored_count,
)
from ledger.leaderboard import belief_scores
from ledger.projection import BrierRow, Ledger
from ledger.store import EventStore
from replays.samples import (
    SAMPLE,
    SAMPLE_BOOKS,
    SAMPLE_BOOKS_HASH,
    SAMPLE_BOOKS_TAPE_HASH,
    SAMPLE_HASH,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       padding: 0 1em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 0.3em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right;
         white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; }
.l { text-align: left; }
th.l + th:not(.l), td.l + td:not(.l) { padding-left: 1.2em; }
td.text { text-align: left; white-space: normal; }
.nw { white-space: nowrap; }
.wrap { white-space: normal; display: inline-block; min-width: 16em; text-align: left; }
p.note { font-size: 0.85em; color: #555; margin: 0 0 1.5em; max-width: 60em; }
.pos { color: #1a7f37; } .neg { color: #cf222e; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; } figcaption { font-size: 0.9em; color: #555; }
code { background: #f4f4f4; padding: 0 0.2em; }
svg text { font-size: 11px; fill: #444; }
"""


COST_LABELS = {
    "cost": "USD",
    "tokens_in": "tokens in",
    "tokens_out": "tokens out",
    "latency_median_ms": "median ms",
    "latency_p95_ms": "p95 ms",
}


# -- pages ---------------------------------------------------------------------------------------


def write_replay_report(
    directory: Path,
    store: EventStore,
    ledger: Ledger,
    intervals: IntervalSettings,
    usage: Usage | None = None,
    books: Sequence[Coverage] = (),
) -> Path:
    """Any replay's log: ``index.html`` and ``report.json`` (what ``arena report --json``
    prints, with the log's digest, and the ``books``' coverage when the cohorts met books) into
    ``directory``; the page's path."""
    cohorts = sorted(ledger.cohorts)
    data = report_data(ledger, usage, intervals) | {
        "db": str(store.path),
        "digest": store.digest(streams=cohorts),
    }
    if books:
        data["coverage"] = [c.as_dict() for c in books]
    records = [fold_cohort(store, cohort) for cohort in cohorts]
    return write_page(directory, "report.json", data, render_replay_html(data, records))


def write_page(directory: Path, name: str, data: dict[str, Any], html: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(data, indent=2) + "\n")
    page = directory / "index.html"
    page.write_text(html)
    return page


def render_replay_html(data: dict[str, Any], records: Sequence[CohortRecord]) -> str:
    """Any replay's page: leaderboard, cohorts, categories, beliefs, cost, charts, settings."""
    names = [row["agent"] for row in data["leaderboard"]]
    colours = agent_colours(names)

    def rows_of(agent: str) -> list[BrierRow]:
        return [row for r in records if agent in r.state.books
                for row in r.state.books[agent].brier_rows]  # fmt: skip

    beliefs = {name: b for name in names if (b := belief_scores(rows_of(name)))}
    board = data["leaderboard"]
    title, mixed = board_heading([r["cohorts"] for r in board], len(data["cohorts"]))
    returns = returns_by_agent(
        (a["agent"], a["return_pct"]) for cohort in data["cohorts"] for a in cohort["agents"]
    )
    hint = interval_hint(((r["agent"], r["return_ci_low"], r["return_ci_high"]) for r in board),
                         returns)  # fmt: skip
    flags = misleading_briers([(r["brier"], r["return_mean"], r["win_rate"]) for r in board])
    legend = [
        "Mean return: the mean of the cohorts' returns.",
        f"{data['interval']['text']}: {data['interval']['detail']}",
        *(sentence(line) for line in (hint, mixed, BRIER_IMPLIED) if line),
        *([sentence(MARK_LEGEND)] if any(flags) else []),
    ]
    sections = [
        f'<h2 id="leaderboard">{escape(title)}</h2>',
        _leaderboard_table(board, flags),
        note(" ".join(legend)),
        '<h2 id="cohorts">Cohorts</h2>',
        _cohort_lines(data, names),
        note("Each agent's return in each cohort."),
        '<h2 id="categories">By category</h2>',
        _categories_table(data["categories"]),
        note(
            "Categories: Polymarket's own (politics, sports, crypto, …), grouping the labels the "
            "tape gives its markets. Return: the category's P/L in points of starting cash, mean "
            "over cohorts (an "
            "agent's categories add up to its mean return). Brier (impl.) pooled over the "
            "category's resolved bets."
        ),
    ]
    if beliefs:
        sections += beliefs_section(beliefs)
    sections += cost_section(data.get("model_usage_by_agent"))
    sections += coverage_section(data.get("coverage", []))
    sections += charts(records, names, colours, rows_of)
    sections += ['<h2 id="settings">Settings</h2>', replay_settings(data)]
    return page(f"Replay of {len(data['cohorts'])} cohort(s)", sections)


def page(title: str, sections: Sequence[str]) -> str:
    body = "\n".join([f"<h1>{escape(title)}</h1>", *sections])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


def agent_colours(names: Sequence[str]) -> dict[str, str]:
    return {name: PALETTE[k % len(PALETTE)] for k, name in enumerate(names)}


def unbroken(text: str) -> str:
    """Text that must not wrap inside (a date breaks at its hyphens otherwise)."""
    return f'<span class="nw">{escape(text)}</span>'


def sentence(text: str) -> str:
    """A legend line the terminal prints on its own as a sentence of a page's note: a capital
    first, a full stop last."""
    return f"{text[:1].upper()}{text[1:]}."


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


# -- tables -------------------------------------------------------------------------------------


def fmt(x: float | None, fmt: str = "{:.4f}") -> str:
    return "—" if x is None else fmt.format(x)


def pct(x: float | None, suffix: str = "%") -> str:
    if x is None:
        return "—"
    cls = "pos" if x > 0 else "neg" if x < 0 else ""
    return f'<span class="{cls}">{x:+,.2f}{suffix}</span>'


def interval_cell(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{low:+.2f}, {high:+.2f}]%"


def html_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1, text: int = 0
) -> str:
    """Figures right-aligned, the first ``left`` columns (names, dates, ids) and the last
    ``text`` (words, such as a tape's labels) left-aligned, each under a heading aligned as it
    is; no cell wraps (a narrow window scrolls the table instead of breaking a date), but a
    header may, so long headers do not push the last columns out of a wide window."""
    figures = range(left, len(header) - text)

    def cell(tag: str, k: int, content: str) -> str:
        return (
            f"<{tag}>{content}</{tag}>" if k in figures else f'<{tag} class="l">{content}</{tag}>'
        )

    head = "".join(cell("th", k, escape(h)) for k, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", k, c) for k, c in enumerate(row)) + "</tr>" for row in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def settings_table(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(
        f'<tr><td class="l">{escape(k)}</td><td class="text">{v}</td></tr>' for k, v in rows
    )
    head = '<thead><tr><th class="l">setting</th><th class="l">value</th></tr></thead>'
    return f"<table>{head}<tbody>{body}</tbody></table>"


def replay_settings(data: dict[str, Any]) -> str:
    """One table per group of cohorts run with the same settings, with the command that
    replays them, execution model and books included (the tape and books are named by their
    hash, the log not knowing where they were, or by their sample's name when embedded)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for cohort in data["cohorts"]:
        settings = {k: v for k, v in cohort["settings"].items() if k != "start"}
        groups.setdefault(json.dumps(settings, sort_keys=True), []).append(cohort)
    parts = [
        settings_table([
            ("package version", escape(data["package_version"])),
            ("log", f"<code>{escape(data['db'])}</code>"),
            ("log digest", f"<code>{escape(data['digest'])}</code>"),
            ("intervals", escape(f"{data['interval']['text']}; {data['interval']['detail']}")),
        ])
    ]  # fmt: skip
    for key, cohorts in groups.items():
        s = json.loads(key)
        starts = [c["start"][:10] for c in cohorts]
        books = s.get("books")
        sample = s["tape"] == SAMPLE_HASH or (
            s["tape"] == SAMPLE_BOOKS_TAPE_HASH and books in (None, SAMPLE_BOOKS_HASH)
        )
        named = SAMPLE_BOOKS if s["tape"] == SAMPLE_BOOKS_TAPE_HASH else SAMPLE
        tape = named if sample else f"TAPE-{s['tape'][:12]}"
        # one cohort by its instant (a start need not be a Sunday midnight); several by the
        # range of Sundays they were replayed over
        when = (
            ["--start", cohorts[0]["start"]]
            if len(cohorts) == 1
            else ["--starts", f"{starts[0]}..{starts[-1]}"]
        )
        command = [
            "arena", "replay", "--tape", tape, *when, "--rules", s["rules"],
            "--cash", f"{s['cash']:g}", "--universe", str(s["universe"]),
            "--decisions", s["decision_cadence"], "--marks", s["mark_cadence"],
            "--seed", str(s["seed"]), *(["--listing", s["listing"]] if "listing" in s else []),
            *_execution_options(s, sample),
            *(a for name, spec in s["agents"].items() for a in ("--agent", f"{name}={spec}")),
        ]  # fmt: skip
        keys = ("rules", "cash", "universe", "universe_by", "decision_cadence", "mark_cadence",
                "seed")  # fmt: skip
        agents = ", ".join(f"{n} = {spec}" for n, spec in s["agents"].items())
        replay = (
            f"<code>{' '.join(unbroken(shlex.quote(w)) for w in command)}</code> "
            + ("(" if sample else "(TAPE: the tape file with that hash; ")
            + "Sundays without a cohort here are skipped)"
        )
        rows = [
            ("cohorts", f"{len(starts)}: " + ", ".join(unbroken(d) for d in starts)),
            ("tape", f"<code>{escape(s['tape'])}</code>"),
            *((k, escape(str(s[k]))) for k in keys),
            ("agents", escape(agents)),
            ("to replay", replay),
        ]
        parts.append(settings_table(rows))
    return "\n".join(parts)


def _execution_options(settings: dict[str, Any], sample: bool) -> list[str]:
    """The options that make the cohort's orders meet what they met (none for Forecaster
    Arena's rule); books other than the embedded sample's are named by their hash."""
    if "execution" not in settings:
        return []
    fees = settings["fees"]  # a user's table by its hash, as books are
    fees = f"FEES-{fees[6:18]}.toml" if fees.startswith("table:") else fees
    options = ["--execution", settings["execution"], "--fees", fees]
    books = settings.get("books")
    if books is not None:
        if not sample or books != SAMPLE_BOOKS_HASH:
            options += ["--books", f"BOOKS-{books[:12]}"]
        llm = "llm+" if settings.get("latency") == "llm" else ""
        options += ["--latency", llm + str(settings.get("latency_ms", 0)),
                    "--liquidity", settings.get("liquidity", "isolated"),
                    "--marks-at", settings.get("marks_at", "price")]  # fmt: skip
    return options


def _leaderboard_table(board: Sequence[dict[str, Any]], marked: Sequence[bool]) -> str:
    """The board's rows, ``MARK`` after the Brier (impl.) of the ``marked`` ones."""
    rows = [
        [
            escape(r["agent"]), str(r["cohorts"]), f"{r['n_bets']:,}", pct(r["total_pnl"], ""),
            pct(r["return_mean"]), interval_cell(r["return_ci_low"], r["return_ci_high"]),
            fmt(r["brier"], "{:.3f}") + (MARK if mark else ""), fmt(r["brier_paid"], "{:.3f}"),
            fmt(r["bss"], "{:+.2f}"), fmt(r["bss_market"], "{:+.2f}"), fmt(r["win_rate"], "{:.0%}"),
        ]
        for r, mark in zip(board, marked, strict=True)
    ]  # fmt: skip
    method = board[0]["interval"] if board else ""
    header = ["agent", "cohorts", "bets", "total P/L ($)", "mean return",
              f"95% CI ({method})", "Brier (impl., pooled)", "Brier (paid)", "BSS", "BSS mkt",
              "win"]  # fmt: skip
    return html_table(header, rows)


def _cohort_lines(data: dict[str, Any], names: Sequence[str]) -> str:
    rows = []
    for cohort in data["cohorts"]:
        returns = {a["agent"]: a["return_pct"] for a in cohort["agents"]}
        status = "closed" if cohort["closed"] else "open"
        rows.append(
            [escape((cohort["start"] or "?")[:10]), escape(cohort["cohort"]),
             str(cohort["markets"]), status, *(pct(returns.get(n)) for n in names)]
        )  # fmt: skip
    return html_table(["start", "cohort", "markets", "status", *names], rows, left=2)


def _categories_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return note("No agent traded any market.")
    body = [
        [escape(r["agent"]), escape(r["category"]), f"{r['markets']:,}", f"{r['n_bets']:,}",
         pct(r["pnl"], ""), pct(r["return_pp"], " pp"), fmt(r["brier"], "{:.3f}"),
         f'<span class="wrap">{escape(", ".join(r["labels"]))}</span>']
        for r in rows
    ]  # fmt: skip
    header = ["agent", "category", "markets", "bets", "P/L ($)", "return",
              "Brier (impl., pooled)", "labels (the tape's)"]  # fmt: skip
    return html_table(header, body, left=2, text=1)


def beliefs_section(beliefs: dict[str, Any]) -> list[str]:
    rows = []
    for name, b in beliefs.items():
        m = b["murphy"]
        scores = [b["brier"], b["log_loss"], b["ece"], m["reliability"], m["resolution"],
                  m["uncertainty"], b["implied_brier"]]  # fmt: skip
        rows.append([escape(name), escape(scored_count(b)), *map(fmt, scores)])
    header = ["agent", "bets", "Brier (stated)", "log loss", "ECE", "REL", "RES", "UNC",
              "Brier (impl., pooled)"]  # fmt: skip
    return [
        '<h2 id="beliefs">Stated beliefs</h2>',
        html_table(header, rows),
        note(
            "Brier (stated): the probability the agent gave for its bet's side, against the "
            "result, pooled over every cohort; REL, RES, UNC: its Murphy decomposition; "
            "Brier (impl.) of the same bets beside it."
        ),
    ]


def cost_section(cost: Any) -> list[str]:
    """What the agents' model calls cost, when the data carries it (``model_usage_by_agent``:
    agent -> figures): one row per agent, its figures in the order the data gives them."""
    if not cost:
        return []
    rows = [(str(agent), figures) for agent, figures in cost.items() if isinstance(figures, dict)]
    keys = list(dict.fromkeys(k for _, figures in rows for k in figures))
    body = [
        [escape(agent), *(escape(_cost_cell(figures.get(k))) for k in keys)]
        for agent, figures in rows
    ]
    header = ["agent", *(COST_LABELS.get(k, k.replace("_", " ")) for k in keys)]
    return [
        '<h2 id="cost">Cost of model calls</h2>',
        html_table(header, body),
        note(
            "Over every cohort: HTTP attempts (calls), questions asked, re-asks after an unusable "
            "answer, attempts that failed, answers the parser rejected, tokens and dollars as "
            "the server reported them (— where it reported none), latency per attempt."
        ),
    ]


LEDGER_COUNTS = {
    "snapshots": "snapshots", "gaps": "gaps", "crossed": "crossed", "locked": "locked",
    "one_sided": "one-sided", "empty": "empty", "tick_changes": "tick changes",
    "mirror_pairs": "YES/NO pairs", "mirror_mismatches": "not mirrored",
}  # fmt: skip
"""The coverage ledger's counts (``MarketLedger.as_dict`` keys) and their headings."""


def coverage_section(books: Sequence[dict[str, Any]]) -> list[str]:
    """The coverage ledger of each books file the cohorts met, over the markets they traded
    (``arena.reports.coverage``), or the line that says why it is not shown."""
    if not books:
        return []
    sections = ['<h2 id="books">Order books</h2>']
    for b in books:
        if b["missing"] is not None:
            sections.append(note(b["missing"]))
            continue
        rows = [[f"<code>{escape(e['market'])}</code>", *(f"{e[k]:,}" for k in LEDGER_COUNTS)]
                for e in b["ledger"]]  # fmt: skip
        gaps = f"Gaps: snapshots of one token more than {b['gap_seconds']:g} s apart."
        sections += [
            html_table(["market", *LEDGER_COUNTS.values()], rows),
            note(
                f"Books {b['books'][:12]}: the coverage ledger (arena tapes validate's) of the "
                f"{len(b['markets'])} market(s) the cohorts traded. {gaps} YES/NO pairs: "
                "snapshots of a market's two tokens at one instant; not mirrored: those where "
                "one book is not the other's mirror."
            ),
        ]
    return sections


def _cost_cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def charts(
    records: Sequence[CohortRecord],
    names: Sequence[str],
    colours: dict[str, str],
    rows_of: Any,
) -> list[str]:
    """Equity curves (all agents' means, then each agent over its cohorts) and a reliability
    diagram per agent; cohorts that were never marked draw no curve."""
    marked = [r for r in records if r.offsets]
    sections = [
        '<h2 id="equity">Equity</h2>',
        note(
            "Total value (cash + positions at the latest marks) by days since each cohort's "
            "start; thin lines are single cohorts, the thick line their mean."
        ),
    ]
    drawn = [name for name in names if any(name in r.values for r in marked)]
    if drawn:
        means = [(name, *mean_equity(marked, name)) for name in drawn]
        sections += [
            '<div class="charts">',
            figure("Mean over cohorts, every agent", equity_chart(means, colours, ())),
            *(figure(name, agent_equity(marked, name, colours[name])) for name in drawn),
            "</div>",
        ]
    else:
        sections.append(note("No cohort was marked: there is no curve to draw."))
    sections += [
        '<h2 id="reliability">Reliability</h2>',
        note(
            f"Forecast against observed frequency in {RELIABILITY_BINS} bins (area ∝ bets): "
            "● implied confidence (amount / 25% of cash), ■ stated belief."
        ),
        '<div class="charts">',
        *(figure(name, reliability_chart(rows_of(name), colours[name])) for name in names),
        "</div>",
    ]
    return sections
