"""A backtest's HTML page (``arena backtest --report``): its settings, the summary with paired
differences against the strategy, each cohort, the charts; built from the shared parts of
``arena.reports.html``, beside ``results.json``.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from arena.backtests.backtest import STRATEGY, SUMMARY_LEGEND, SUMMARY_ORDER, BacktestResult
from arena.reports.html import (
    agent_colours,
    beliefs_section,
    charts,
    cost_section,
    fmt,
    html_table,
    interval_cell,
    note,
    page,
    pct,
    settings_table,
    unbroken,
    write_page,
)


def write_backtest_report(directory: Path, result: BacktestResult, data: dict[str, Any]) -> Path:
    """A backtest: ``index.html`` and ``results.json`` into ``directory``; the page's path."""
    return write_page(directory, "results.json", data, render_backtest_html(result, data))


def render_backtest_html(result: BacktestResult, data: dict[str, Any]) -> str:
    """The backtest page: settings, summary with paired differences, cohorts, charts."""
    names = result.agent_names
    colours = agent_colours(names)
    sections = [
        settings_table(settings_rows(data)),
        '<h2 id="summary">Summary over cohorts</h2>',
        summary_table(data),
        paired_table(data),
        note(
            f"{data['interval']['text']}: {data['interval']['detail']} {SUMMARY_ORDER} · "
            f"{SUMMARY_LEGEND}."
        ),
        '<h2 id="per-cohort">Per cohort</h2>',
        cohort_table(data),
        note(SUMMARY_LEGEND + "."),
    ]
    if data["beliefs"]:
        sections += beliefs_section(data["beliefs"])
    sections += cost_section(data.get("model_usage_by_agent"))
    sections += charts(result.records, names, colours, result.brier_rows)
    return page(f"Backtest of {data['strategy']}", sections)


def settings_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    settings = data["settings"]
    starts = settings["starts"]
    rows = [
        ("strategy", f"<code>{escape(data['strategy'])}</code> (trades as {STRATEGY})"),
        ("against", escape(", ".join(data["against"]))),
        ("cohorts", f"{len(starts)}: {unbroken(starts[0][:10])} .. {unbroken(starts[-1][:10])}"),
        ("tape", f"<code>{escape(data['tape'])}</code> ({escape(settings['tape_path'])})"),
        ("package version", escape(data["package_version"])),
        ("log digest", f"<code>{escape(data['digest'])}</code>"),
    ]
    for key in ("universe", "cash", "rules", "decision_cadence", "mark_cadence", "seed"):
        rows.append((key, escape(str(settings[key]))))
    cohorts = data["cohorts"]
    for by in sorted({c["universe_by"] for c in cohorts}):
        n = sum(c["universe_by"] == by for c in cohorts)
        rows.append(("universe chosen by", escape(f"{by} ({n} of {len(cohorts)} cohorts)")))
    stops = [c for c in cohorts if c["decisions_stopped"]]
    if stops:
        first = stops[0]["decisions_stopped"]
        rows.append(("decisions stopped early", escape(
            f"{len(stops)} of {len(cohorts)} cohorts, e.g. {stops[0]['start'][:10]}: {first}"
        )))  # fmt: skip
    return rows


def summary_table(data: dict[str, Any]) -> str:
    """Each agent's figures over the cohorts, the strategy first. Its paired differences are a
    table of their own (``paired_table``): in one table of thirteen columns the last, "sig.",
    was off the right edge of the page's 1100 px at any window width."""
    rows = []
    for name, s in data["summary"].items():
        rows.append(
            [
                escape(name),
                str(s["cohorts"]),
                pct(s["return_mean"]),
                interval_cell(s["return_ci_low"], s["return_ci_high"]),
                fmt(s["brier_mean"]),
                fmt(s["brier"]),
                fmt(s["brier_paid"]),
                fmt(s["bss"], "{:+.3f}"),
                fmt(s["bss_market"], "{:+.3f}"),
                fmt(s["win_rate"], "{:.1%}"),
            ]
        )
    method = data["interval"]["method"]
    header = ["agent", "cohorts", "mean return", f"95% CI ({method})",
              "Brier (impl., mean of cohorts)", "Brier (impl., pooled)", "Brier (paid)", "BSS",
              "BSS mkt", "win rate"]  # fmt: skip
    return html_table(header, rows)


def paired_table(data: dict[str, Any]) -> str:
    """The strategy's return less each comparison agent's, cohort by cohort, with its
    interval and whether that excludes 0."""
    rows = [
        [escape(name), pct(pair["mean"]), interval_cell(pair["ci_low"], pair["ci_high"]),
         "✓" if pair["significant"] else "·"]
        for name, pair in data["paired"].items()
    ]  # fmt: skip
    method = data["interval"]["method"]
    header = ["compared with", f"{STRATEGY} − agent", f"95% CI ({method})",
              "sig. (the interval excludes 0)"]  # fmt: skip
    return html_table(header, rows)


_GAP = "padding-left:1.2em"
"""Where an agent's columns begin in the per-cohort table: a wider gap sets each agent apart."""


def cohort_table(data: dict[str, Any]) -> str:
    """Each cohort by its id (which begins with its start date), agent by agent: an agent's
    name once over its three columns (return, Brier (impl.), win rate), not in each column's
    header. With a start column and the names in every header, four agents' twelve columns
    were wider than the page and scrolled at 1400 px."""
    names = list(data["settings"]["agents"])
    top = '<th class="l" rowspan="2">cohort</th><th rowspan="2">markets</th>' + "".join(
        f'<th colspan="3" style="{_GAP}; text-align:center">{escape(n)}</th>' for n in names
    )
    sub = f'<th style="{_GAP}">return</th><th>Brier (impl.)</th><th>win rate</th>' * len(names)
    rows = []
    for cohort in data["cohorts"]:
        cells = [f'<td class="l">{escape(cohort["cohort"])}</td>', f"<td>{cohort['markets']}</td>"]
        for name in names:
            a = cohort["agents"][name]
            cells += [f'<td style="{_GAP}">{pct(a["return_pct"])}</td>',
                      f"<td>{fmt(a['brier'], '{:.3f}')}</td>",
                      f"<td>{fmt(a['win_rate'], '{:.0%}')}</td>"]  # fmt: skip
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = f"<thead><tr>{top}</tr><tr>{sub}</tr></thead>"
    return f'<div class="scroll"><table>{head}<tbody>{"".join(rows)}</tbody></table></div>'
