"""``arena backtest``'s summary table says what it shows."""

from __future__ import annotations

import io

from rich.console import Console

from arena.commands.backtest import summary_table


def row(mean: float, brier: float | None, paid: float | None) -> dict[str, object]:
    return {
        "return_mean": mean, "return_ci_low": mean - 1, "return_ci_high": mean + 1,
        "brier": brier, "brier_paid": paid, "bss": None, "bss_market": None, "win_rate": 0.5,
    }  # fmt: skip


def test_the_summary_shows_both_briers_its_legend_explains_in_its_own_order() -> None:
    """The legend explained a Brier (paid) the table did not show, and said "ranked by
    return" over rows that are the strategy first, then the agents it is compared with."""
    data = {
        "cohorts": [{}, {}],
        "interval": {"text": "95% interval: bootstrap"},
        "summary": {"strategy": row(-1.66, 0.2247, 0.0513), "favourite": row(1.78, 0.4249, 0.0006)},
        "paired": {"favourite": {"mean": -3.44, "ci_low": -5.0, "ci_high": -1.0,
                                 "significant": True}},
    }  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(summary_table(data))
    text = " ".join(out.getvalue().split())
    assert "Brier (paid)" in text and "0.0513" in text and "0.0006" in text
    assert "ranked by return" not in text
    assert "strategy first, then the agents it is compared with" in text
