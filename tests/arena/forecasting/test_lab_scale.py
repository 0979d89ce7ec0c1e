"""The lab at forecastbench's largest published sizes: linear costs, float32 tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.bench import lab_bench
from arena.forecasting.lab.cube import MAX_CUBE_DIM, CubeHistogram
from arena.forecasting.lab.experiments import (
    IntrinsicPostConfig,
    _post_expectation,
    run_intrinsic_post,
)
from arena.forecasting.lab.parity import ParityMarket
from arena.forecasting.lab.progress import Silent
from ledger.metrics import GroupBinTable


def _looped(k, train_keys, train_p, test_keys, test_p, centre):  # type: ignore[no-untyped-def]
    """The fallback as first written: every subcube scanned for each empty one (quadratic)."""
    groups = len(centre)
    n_g = np.bincount(train_keys, minlength=groups).astype(np.float64)
    f_g = np.zeros(groups)
    f_g[train_keys] = train_p
    f_g[test_keys] = test_p
    mean_est = (n_g * f_g + k * centre) / (n_g + k)
    var_est = n_g * f_g * (1 - f_g) / (n_g + k) ** 2
    for g in np.flatnonzero(n_g == 0):
        same = [h for h in range(groups) if n_g[h] > 0 and centre[h] == centre[g]]
        rows = n_g[same].sum()
        if rows == 0:
            mean_est[g], var_est[g] = centre[g], 0.0
            continue
        fs = f_g[same]
        mean_est[g] = (np.sum(n_g[same] * fs) + k * centre[g]) / (rows + k)
        var_est[g] = np.sum(n_g[same] * fs * (1 - fs)) / (rows + k) ** 2
    mu = mean_est - f_g
    weight = np.bincount(test_keys, minlength=groups) / len(test_keys)
    return float(np.sum(weight * (mu**2 + var_est))), float(
        np.sqrt(np.sum(weight**2 * (2 * var_est**2 + 4 * mu**2 * var_est)))
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_the_sample_tax_per_bin_equals_the_scan(
    k: int, n_train: int, n_test: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    groups = 1 << k
    centre = rng.choice([0.125, 0.475, 0.875], size=groups)
    f = rng.choice([0.1, 0.9], size=groups)
    train_keys = rng.integers(0, groups, n_train)
    test_keys = rng.integers(0, groups, n_test)
    args = (5.0, train_keys, f[train_keys], test_keys, f[test_keys], centre)
    assert _post_expectation(*args) == pytest.approx(_looped(*args), rel=1e-12, abs=1e-15)


def test_intrinsic_post_at_k_16_with_most_subcubes_unseen() -> None:
    """65,536 subcubes, 2,000 training rows: over 63,000 empty subcubes fall back to their
    bin. Scanning every subcube for each of them was 4e9 steps (killed after 300 s)."""
    cfg = IntrinsicPostConfig(d=16, k=16, n_train=2_000, n_test=1_000)
    result = run_intrinsic_post(cfg, Silent())
    assert [c.name for c in result.checks if not c.ok] == []


def test_the_float32_table_keeps_means_as_the_original() -> None:
    """One cell, 9 YES in 10, forecasts in bin 17 of 20 (centre 0.875), prior 5. Exactly:
    (9 + 5·0.875)/15 = 13.375/15. The original stores the mean 0.9 as float32
    0.8999999761581421 and multiplies back: (8.999999761581421 + 4.375)/15."""
    table = GroupBinTable(groups=1, bins=20, prior_strength=5.0)
    table.add(np.zeros(10, dtype=np.intp), np.full(10, 17, dtype=np.intp), np.r_[np.ones(9), 0.0])
    cell, bin_, q = np.zeros(1, dtype=np.intp), np.full(1, 17, dtype=np.intp), np.array([0.87])
    assert table.predict(cell, bin_, q).tolist() == [13.375 / 15]
    assert table.predict(cell, bin_, q, float32_means=True).tolist() == [
        (8.999999761581421 + 4.375) / 15
    ]


def test_the_cube_takes_d_24_and_refuses_past_it() -> None:
    assert MAX_CUBE_DIM == 24
    z = np.ones((1, 25), dtype=np.int8)
    with pytest.raises(ValueError, match="d = 25 is too large for the cube histogram"):
        CubeHistogram.of_rows(z, np.zeros(1))


def test_bench_published_measures_each_run_in_its_own_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = (("intrinsic-post", "run_intrinsic_post", "IntrinsicPostConfig", {"d": 6, "k": 2}),)
    monkeypatch.setattr(lab_bench, "PUBLISHED", small)
    figures = lab_bench.bench_published()
    assert list(figures) == [
        "intrinsic-post d=6 k=2 seconds",
        "intrinsic-post d=6 k=2 cpu_seconds",
        "intrinsic-post d=6 k=2 peak_mib",
        "intrinsic-post d=6 k=2 checks_ok",
    ]
    assert figures["intrinsic-post d=6 k=2 checks_ok"] is True
    assert figures["intrinsic-post d=6 k=2 peak_mib"] > 0


def test_float32_residuals_are_subtracted_in_float32() -> None:
    """The original's f − q subtracts two float32 arrays: 0.099999994 − 0.7 (float32
    0.699999988) rounds to −0.6000000238418579, where float64 gives −0.5999999940395355."""
    p, q = np.array([0.09999999403953552]), np.array([0.699999988079071])
    cast = ParityMarket.create(d=1, k=1, alpha=0.8, seed=0, float32=True)
    assert cast.residual(p, q).tolist() == [-0.6000000238418579]
    plain = ParityMarket.create(d=1, k=1, alpha=0.8, seed=0)
    assert plain.residual(p, q).tolist() == [0.09999999403953552 - 0.699999988079071]
