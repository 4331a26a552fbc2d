"""Known-answer, coverage and cross-check tests of lib.stats (no database)."""

from __future__ import annotations

import itertools
import random

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from lib import stats
from lib.stats import bootstrap, interrater, sensitivity_checks


def design(cells, clusters, K=4):
    return stats.cluster_design(np.asarray(cells), np.asarray(clusters, dtype=object), K)


# --- matrices ---------------------------------------------------------------


def test_it_counts_a_matrix_with_margins_and_proportions():
    m = stats.cell_matrix(np.array([0, 0, 1, 2, 2, 2, -1]), np.array([1, 1, 0, 2, 2, 0, 1]), 3, 3)
    assert m.counts.tolist() == [[0, 2, 0], [1, 0, 0], [1, 0, 2]]
    assert m.n == 6  # the row with a missing stage is not counted
    assert m.row_totals.tolist() == [2, 1, 3]
    assert m.col_totals.tolist() == [2, 2, 2]
    assert m.proportions[2, 2] == pytest.approx(2 / 6)
    with pytest.raises(ValueError):
        m.counts[0, 0] = 5  # results are immutable


def test_it_reports_not_enough_data_for_an_empty_matrix_without_nan():
    m = stats.cell_matrix(np.array([], dtype=int), np.array([], dtype=int), 7, 6)
    assert not m.enough and m.reason == "no episodes"
    assert np.isfinite(m.proportions).all() and m.proportions.sum() == 0
    d = design([], [], K=42)
    ok, reason = stats.design_enough(d)
    assert not ok and "no episodes" in reason
    boot = stats.cell_intervals(d, stats.replicate_blocks([d], B=200, seed=1)[0])
    assert not boot.enough and np.isfinite(boot.low).all()


def test_it_counts_a_distribution_and_its_missing_values():
    d = stats.distribution(np.array([2, 2, 0, -1]), 3)
    assert d.counts.tolist() == [1, 0, 2] and d.missing == 1 and d.n == 4


def test_it_builds_designs_independent_of_row_order():
    cells = np.array([0, 1, 1, 2, 3, 3, 0])
    clusters = np.array(["b", "a", "a", "c", "b", "c", "a"], dtype=object)
    d = design(cells, clusters)
    assert d.names == ("a", "b", "c")
    assert d.counts.tolist() == [[1, 2, 0, 0], [1, 0, 0, 1], [0, 0, 1, 1]]
    perm = np.random.default_rng(3).permutation(len(cells))
    d2 = design(cells[perm], clusters[perm])
    assert d2.names == d.names and np.array_equal(d2.counts, d.counts)
    assert np.array_equal(d2.cells, d.cells) and np.array_equal(d2.episode_cluster, d.episode_cluster)


# --- bootstrap streams ------------------------------------------------------


def paper_like(seed=0, n_clusters=60):
    rng = np.random.default_rng(seed)
    sizes = 1 + rng.poisson(1.5, n_clusters) * (rng.random(n_clusters) < 0.5)
    cells = np.concatenate([rng.choice(4, size=s, p=[0.55, 0.25, 0.15, 0.05]) for s in sizes])
    clusters = np.repeat(np.array([f"r{i:03d}" for i in range(n_clusters)], dtype=object), sizes)
    return design(cells, clusters)


def test_it_gives_identical_replicates_for_the_same_seed_and_different_for_another():
    d = paper_like()
    a = stats.replicate_blocks([d], B=1000, seed=11)[0]
    b = stats.replicate_blocks([d], B=1000, seed=11)[0]
    c = stats.replicate_blocks([d], B=1000, seed=12)[0]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_it_gives_the_same_replicates_whatever_the_chunks_and_threads():
    d1, d2 = paper_like(1), paper_like(2, n_clusters=30)
    B = 5 * stats.BLOCK + 17  # a ragged last block
    whole = stats.replicate_blocks([d1, d2], B=B, seed=5, threads=1)
    threaded = stats.replicate_blocks([d1, d2], B=B, seed=5, threads=3)
    total = stats.n_blocks(B)
    for cuts in ([0, 1, total], [0, 2, 3, 5, total], list(range(total + 1))):
        parts = [stats.replicate_blocks([d1, d2], B=B, seed=5, start=a, stop=b) for a, b in itertools.pairwise(cuts)]
        for i in range(2):
            assert np.array_equal(np.vstack([p[i] for p in parts]), whole[i])
    for w, t in zip(whole, threaded, strict=True):
        assert w.shape == (B, 4) and np.array_equal(w, t)


def test_it_resamples_each_replicate_to_the_cluster_count():
    d = paper_like()
    reps = stats.replicate_blocks([d], B=300, seed=2)[0]
    # Identical designs drawn by replicate weights: every replicate total is a sum of G cluster sizes.
    assert reps.min() >= 0
    assert (reps.sum(axis=1) >= d.n_clusters).all()


def test_it_matches_exact_probabilities_on_two_clusters():
    # Two one-episode clusters in cells 0 and 1: p0* is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4.
    d = design([0, 1], ["x", "y"], K=2)
    reps = stats.replicate_proportions(stats.replicate_blocks([d], B=8000, seed=4)[0])[:, 0]
    freq = [np.mean(reps == v) for v in (0.0, 0.5, 1.0)]
    assert freq == pytest.approx([0.25, 0.5, 0.25], abs=0.02)


def test_it_gives_a_real_interval_even_when_every_cluster_is_identical():
    d = design([0, 1, 0, 1, 0, 1], ["a", "a", "b", "b", "c", "c"], K=2)
    reps = stats.replicate_blocks([d], B=500, seed=1)[0]
    # The percentile bootstrap cannot see any spread: every replicate is 1/2.
    boot = stats.cell_intervals(d, reps, method="percentile")
    assert boot.low.tolist() == [0.5, 0.5] and boot.high.tolist() == [0.5, 0.5]
    # The default still says that 6 episodes in 3 clusters pin little down.
    default = stats.cell_intervals(d, reps)
    assert default.method == stats.DEFAULT_CELL_METHOD
    assert (default.low < 0.2).all() and (default.high > 0.8).all()
    assert default.few_clusters.all()


def slow_cluster_bootstrap(cells, clusters, K, B, seed):
    """An independent reference: a Python loop that resamples clusters with random.choices."""
    rnd = random.Random(seed)
    by_cluster: dict[str, list[int]] = {}
    for c, g in zip(cells, clusters, strict=True):
        by_cluster.setdefault(g, []).append(c)
    names = sorted(by_cluster)
    out = np.zeros((B, K))
    for r in range(B):
        counts = [0] * K
        for g in rnd.choices(names, k=len(names)):
            for c in by_cluster[g]:
                counts[c] += 1
        out[r] = np.array(counts) / sum(counts)
    return out


def test_it_matches_a_slow_reference_implementation_within_monte_carlo_error():
    d = paper_like(7, n_clusters=80)
    cells = d.cells
    clusters = np.asarray(d.names, dtype=object)[d.episode_cluster]
    B = 3000
    ours = stats.replicate_proportions(stats.replicate_blocks([d], B=B, seed=9)[0])
    ref = slow_cluster_bootstrap(cells.tolist(), clusters.tolist(), 4, B, seed=9)
    # Same distribution: means, spreads and the percentile limits agree within Monte-Carlo error.
    assert ours.mean(axis=0) == pytest.approx(ref.mean(axis=0), abs=0.006)
    assert ours.std(axis=0) == pytest.approx(ref.std(axis=0), rel=0.1, abs=0.003)
    lo, hi = np.quantile(ours, [0.025, 0.975], axis=0)
    rlo, rhi = np.quantile(ref, [0.025, 0.975], axis=0)
    assert lo == pytest.approx(rlo, abs=0.015) and hi == pytest.approx(rhi, abs=0.015)


def test_it_draws_heavy_and_light_clusters_with_the_right_distribution():
    # Many identical one-episode clusters (drawn by multinomial) next to unique ones (drawn by index).
    cells = [0] * 40 + [1] * 30 + [0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 2, 0]
    clusters = [f"s{i}" for i in range(70)] + ["u1", "u1", "u2", "u2", "u3", "u3", "u4", "u4", "u5", "u5", "u6", "u6"]
    d = design(cells, clusters)
    plan = bootstrap._plan(d)
    assert plan.G_heavy == 70 and plan.light_rows.shape[0] == 6
    B = 4000
    ours = stats.replicate_blocks([d], B=B, seed=3)[0]
    ref_counts = np.zeros((B, 4))
    rnd = random.Random(3)
    C = d.counts
    for r in range(B):
        ref_counts[r] = C[[rnd.randrange(d.n_clusters) for _ in range(d.n_clusters)]].sum(axis=0)
    assert ours.mean(axis=0) == pytest.approx(ref_counts.mean(axis=0), rel=0.03)
    assert ours.std(axis=0) == pytest.approx(ref_counts.std(axis=0), rel=0.08)


def simulate_coverage(n_draws: int, B: int, seed: int) -> tuple[float, float]:
    """Share of draws whose 95% interval covers the true cell share and the true difference."""
    rng = np.random.default_rng(seed)
    true_a, true_b = 0.3, 0.1
    hit_cell = hit_diff = 0
    for i in range(n_draws):
        designs = []
        for p in (true_a, true_b):
            G = 40
            sizes = rng.integers(1, 6, G)
            # Clusters differ in their own share (beta around p), so the clustering matters.
            ps = rng.beta(4 * p / (1 - p), 4, G)
            cells = np.concatenate([(rng.random(s) >= q).astype(int) for s, q in zip(sizes, ps, strict=True)])
            clusters = np.repeat(np.arange(G).astype(str).astype(object), sizes)
            designs.append(design(cells, clusters, K=2))
        ra, rb = stats.replicate_blocks(designs, B=B, seed=i, threads=1)
        ca = stats.cell_intervals(designs[0], ra)
        diff = stats.diff_intervals(designs[0], designs[1], ra, rb)
        hit_cell += ca.low[0] <= true_a <= ca.high[0]
        hit_diff += diff.low[0] <= true_a - true_b <= diff.high[0]
    return hit_cell / n_draws, hit_diff / n_draws


@pytest.mark.slow
def test_it_covers_known_proportions_at_close_to_the_nominal_rate():
    cell, diff = simulate_coverage(n_draws=300, B=400, seed=42)
    # 300 draws: a 95% rate has a standard error of about 1.3 points.
    assert 0.89 <= cell <= 0.99, cell
    assert 0.89 <= diff <= 0.99, diff


def slow_bca(reps, est, jack, level=0.95):
    from statistics import NormalDist

    nd = NormalDist()
    B = len(reps)
    below = sum(1 for r in reps if r < est) + 0.5 * sum(1 for r in reps if r == est)
    z0 = nd.inv_cdf(min(max(below / B, 1 / (B + 1)), B / (B + 1)))
    mean = sum(jack) / len(jack)
    num = sum((mean - j) ** 3 for j in jack)
    den = 6 * sum((mean - j) ** 2 for j in jack) ** 1.5
    a = num / den if den > 0 else 0.0
    out = []
    for q in ((1 - level) / 2, 1 - (1 - level) / 2):
        z = nd.inv_cdf(q)
        out.append(nd.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))))
    s = sorted(reps)
    limits = []
    for q in out:
        pos = min(max(q * (B - 1), 0), B - 1)
        lo = int(pos)
        hi = min(lo + 1, B - 1)
        limits.append(s[lo] + (s[hi] - s[lo]) * (pos - lo))
    return limits


def test_it_computes_bca_limits_like_a_slow_reference():
    d = paper_like(5, n_clusters=50)
    reps = stats.replicate_blocks([d], B=2000, seed=8)[0]
    boot = stats.cell_intervals(d, reps, bca=True)
    props = stats.replicate_proportions(reps)
    jack = bootstrap._jackknife_props(d)
    for k in range(4):
        lo, hi = slow_bca(props[:, k].tolist(), d.totals[k] / d.n, jack[:, k].tolist())
        assert boot.low[k] == pytest.approx(lo, abs=1e-12) and boot.high[k] == pytest.approx(hi, abs=1e-12)
    assert boot.method == "bca"
    assert (boot.low <= boot.estimate + 1e-12).all() and (boot.estimate <= boot.high + 1e-12).all()


# --- sensitivity ------------------------------------------------------------


def dominated():
    """Kind a: one big cluster of 10 episodes in cell 0, five single episodes in cell 1. Kind b: six in cell 1."""
    a = design([0] * 10 + [1] * 5, ["big"] * 10 + [f"s{i}" for i in range(5)], K=2)
    b = design([1] * 6, [f"p{i}" for i in range(6)], K=2)
    return a, b


def test_it_finds_the_cluster_that_carries_a_contrast():
    a, b = dominated()
    checks = {c.name: c for c in stats.sensitivity(a, b, 0, B=400, seed=1, cap=2, subsamples=5)}
    loo = checks["leave_one_cluster_out"]
    assert loo.detail["most_influential"]["cluster"] == "big"
    assert loo.detail["min"] == pytest.approx(0.0)
    assert loo.detail["max"] == pytest.approx(10 / 14)  # dropping a single-episode cluster
    assert loo.estimate == pytest.approx(0.0) and loo.keeps_sign is False and loo.excludes_zero is False
    cap = checks["cluster_cap"]
    assert cap.estimate == pytest.approx(2 / 7)  # big keeps 2 of its 10, all in cell 0
    assert cap.detail["subsamples"] == 5
    drop = checks["drop_largest_cluster"]
    assert drop.estimate == pytest.approx(0.0) and drop.keeps_sign is False
    assert drop.detail["a"] == "big" and drop.detail["b"] is None  # b's clusters hold one episode each
    rec = checks["record_bootstrap"]
    assert rec.estimate == pytest.approx(10 / 15)
    assert rec.excludes_zero is True
    # Ignoring the clustering claims a much narrower interval.
    assert rec.detail["widening"] > 1.5


def test_it_reports_sensitivity_without_enough_data_as_such():
    a, _ = dominated()
    empty = design([], [], K=2)
    checks = stats.sensitivity(a, empty, 0, B=200, seed=1)
    assert len(checks) == 4 and all(not c.enough and c.estimate is None for c in checks)


def test_it_keeps_sign_on_a_robust_contrast():
    rng = np.random.default_rng(0)
    a = design(rng.choice(2, 200, p=[0.7, 0.3]), [f"a{i % 50}" for i in range(200)], K=2)
    b = design(rng.choice(2, 80, p=[0.2, 0.8]), [f"b{i}" for i in range(80)], K=2)
    checks = stats.sensitivity(a, b, 0, B=400, seed=3)
    assert all(c.keeps_sign and c.excludes_zero for c in checks)


# --- agreement --------------------------------------------------------------


def test_it_computes_hand_checked_agreement_for_two_coders():
    a = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    b = [0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
    res = stats.agreement(np.array([a, b]).T, 2, B=200, seed=1)
    assert res.percent.value == pytest.approx(0.8)
    assert res.pairs[0].kappa.value == pytest.approx(0.6)
    assert res.fleiss_kappa.value == pytest.approx(0.6)
    assert res.krippendorff_alpha.value == pytest.approx(1 - 19 * 4 / 200)  # 0.62
    assert res.gwet_ac1.value == pytest.approx(0.6)
    assert res.pairs[0].confusion.tolist() == [[4, 1], [1, 4]]
    assert res.n_units == 10 and res.n_ratings == 20
    assert res.percent.low <= 0.8 <= res.percent.high


def test_it_matches_the_krippendorff_package_with_missing_codings():
    rng = np.random.default_rng(5)
    U, R, Q = 300, 4, 12
    truth = rng.integers(0, Q, U)
    codes = np.where(rng.random((U, R)) < 0.6, truth[:, None], rng.integers(0, Q, (U, R)))
    codes[rng.random((U, R)) < 0.3] = -1
    res = stats.agreement(codes, Q, B=100, seed=0)
    data = np.where(codes < 0, np.nan, codes).T.astype(float)
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert abs(res.krippendorff_alpha.value - ref) < 1e-9


def test_it_matches_sklearn_for_cohens_kappa_and_confusion():
    rng = np.random.default_rng(6)
    a = rng.integers(0, 5, 200)
    b = np.where(rng.random(200) < 0.7, a, rng.integers(0, 5, 200))
    res = stats.agreement(np.array([a, b]).T, 5, B=100, seed=0)
    assert res.pairs[0].kappa.value == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert res.pairs[0].confusion.tolist() == confusion_matrix(a, b, labels=range(5)).tolist()
    # The pair keeps only the non-zero cells, in (row, column) order: whole labels can number thousands.
    rows, cols, n = res.pairs[0].cells
    dense = confusion_matrix(a, b, labels=range(5))
    assert [rows.tolist(), cols.tolist()] == [x.tolist() for x in np.nonzero(dense)]
    assert n.tolist() == dense[dense > 0].tolist() and res.pairs[0].categories == 5


def test_it_computes_fleiss_kappa_for_three_coders_by_hand():
    # Fleiss' worked form: P_i from counts per unit, P_e from pooled shares.
    codes = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 1], [1, 0, 1], [2, 2, 2]])
    N = np.array([[3, 0, 0], [2, 1, 0], [0, 3, 0], [1, 2, 0], [0, 0, 3]])
    P_i = ((N**2).sum(axis=1) - 3) / 6
    p_j = N.sum(axis=0) / 15
    expected = (P_i.mean() - (p_j**2).sum()) / (1 - (p_j**2).sum())
    res = stats.agreement(codes, 3, B=100, seed=0)
    assert res.fleiss_kappa.value == pytest.approx(expected)
    assert len(res.pairs) == 3


def test_it_says_when_agreement_is_undefined_instead_of_nan():
    res = stats.agreement(np.array([[1, 1], [1, 1], [1, 1]]), 3, B=100, seed=0)
    assert res.pairs[0].kappa.value is None and "undefined" in res.pairs[0].kappa.reason
    assert res.krippendorff_alpha.value is None
    assert res.percent.value == 1.0
    empty = stats.agreement(np.full((4, 2), -1), 3, B=100, seed=0)
    assert not empty.enough and empty.percent.value is None and empty.pairs == ()


def test_it_gives_the_same_agreement_for_the_same_seed():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 4, (100, 3))
    a, b = stats.agreement(codes, 4, B=300, seed=9), stats.agreement(codes, 4, B=300, seed=9)
    assert a.fleiss_kappa == b.fleiss_kappa and a.gwet_ac1 == b.gwet_ac1


def test_it_ranks_specific_agreement_per_category():
    codes = np.array([[0, 0], [0, 0], [1, 2], [1, 1], [2, 2]])
    res = stats.agreement(codes, 3, B=100, seed=0)
    # Category 0: 4 of 4 ratings agree; 1: 2 of 3; 2: 2 of 3.
    assert res.specific.tolist() == pytest.approx([1.0, 2 / 3, 2 / 3])
    assert res.specific_n.tolist() == [4, 3, 3]


# --- Wilson -----------------------------------------------------------------


def test_it_computes_wilson_intervals():
    w = stats.wilson(8, 10)
    assert (w.low, w.high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert stats.wilson(0, 5).low == 0.0 and stats.wilson(5, 5).high == 1.0
    none = stats.wilson(0, 0)
    assert not none.enough and none.value is None and none.reason


# --- input validation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda v: stats.cell_matrix(np.array([v, 0]), np.array([0, 0]), 2, 2), "rows"),
        (lambda v: stats.cell_matrix(np.array([0, 0]), np.array([0, v]), 2, 2), "cols"),
        (lambda v: stats.distribution(np.array([v, 1]), 2), "values"),
        (lambda v: stats.cluster_design(np.array([v, 1]), ["a", "b"], 2), "cells"),
        (lambda v: stats.agreement(np.array([[v, 1], [1, 1], [0, 0]]), 2, B=10), "codes"),
    ],
)
@pytest.mark.parametrize("bad", [0.9, -2, float("nan")])
def test_it_refuses_fractional_missing_like_and_nan_codes_naming_the_argument(call, name, bad):
    with pytest.raises(ValueError, match=rf"^{name} "):
        call(bad)


def test_it_accepts_whole_float_codes_as_the_integers_they_are():
    as_float = stats.agreement(np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [-1.0, 0.0]]), 2, B=50, seed=1)
    as_int = stats.agreement(np.array([[0, 1], [1, 1], [0, 0], [-1, 0]]), 2, B=50, seed=1)
    assert as_float.fleiss_kappa == as_int.fleiss_kappa and as_float.n_rated == 4
    assert stats.distribution(np.array([1.0, -1.0]), 2).counts.tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"^codes must hold integer codes"):
        stats.agreement(np.array([["a", "b"], ["c", "d"]], dtype=object), 2)


@pytest.mark.parametrize("B", [0, -5, 2.5, True, None])
def test_it_refuses_a_replicate_count_that_is_not_a_positive_whole_number(B):
    d = paper_like()
    for call in (
        lambda: stats.replicate_blocks([d], B=B, seed=1),
        lambda: stats.agreement(np.array([[0, 1], [1, 1], [0, 0]]), 2, B=B),
        lambda: stats.bootstrap_diff_cell(d, d, 0, B=B, seed=1),
        lambda: stats.sensitivity(d, d, 0, B=B, seed=1),
    ):
        with pytest.raises(ValueError, match=r"^B must be a whole number of at least 1"):
            call()


@pytest.mark.parametrize("level", [-0.95, 0, 1, 1.5, True, float("nan"), "0.95"])
def test_it_refuses_a_level_outside_zero_to_one(level):
    d = paper_like()
    reps = stats.replicate_blocks([d], B=10, seed=1)[0]
    for call in (
        lambda: stats.cell_intervals(d, reps, level=level),
        lambda: stats.cell_intervals(d, reps, level=level, method="percentile"),
        lambda: stats.diff_intervals(d, d, reps, reps, level=level),
        lambda: stats.agreement(np.array([[0, 1], [1, 1], [0, 0]]), 2, B=10, level=level),
        lambda: stats.wilson(1, 2, level=level),
        lambda: stats.bootstrap_diff_cell(d, d, 0, B=10, seed=1, level=level),
        lambda: stats.one_sided_disagreement(0, 5, level=level),
    ):
        with pytest.raises(ValueError, match=r"^level must be between 0 and 1 \(exclusive\)"):
            call()


def test_it_refuses_cluster_names_that_would_merge():
    with pytest.raises(ValueError, match=r"^clusters mix types whose names collide"):
        stats.cluster_design(np.array([0, 1]), np.array([1, "1"], dtype=object), 2)
    # Mixed types that stay distinct, and integers alone, are fine.
    assert stats.cluster_design(np.array([0, 1]), np.array([1, "2"], dtype=object), 2).names == ("1", "2")
    assert stats.cluster_design(np.array([0, 1, 1]), np.array([10, 9, 10]), 2).names == ("10", "9")
    with pytest.raises(ValueError, match=r"^cells and clusters must have the same length"):
        stats.cluster_design(np.array([0, 1]), ["a"], 2)


def test_it_checks_the_range_of_cells_rows_cols_and_values():
    with pytest.raises(ValueError, match=r"^cells hold a cell index out of range"):
        stats.cluster_design(np.array([0, 4]), ["a", "b"], 4)
    with pytest.raises(ValueError, match=r"^cells hold a cell index out of range"):
        stats.cluster_design(np.array([-1, 0]), ["a", "b"], 4)
    assert stats.cluster_design(np.array([0, 3]), ["a", "b"], 4).totals.tolist() == [1, 0, 0, 1]
    with pytest.raises(ValueError, match=r"^rows or cols hold a code out of range"):
        stats.cell_matrix(np.array([2]), np.array([0]), 2, 2)
    with pytest.raises(ValueError, match=r"^rows or cols hold a code out of range"):
        stats.cell_matrix(np.array([0]), np.array([2]), 2, 2)
    assert stats.cell_matrix(np.array([1]), np.array([1]), 2, 2).n == 1
    with pytest.raises(ValueError, match=r"^rows and cols must have the same length"):
        stats.cell_matrix(np.array([0, 1]), np.array([0]), 2, 2)
    with pytest.raises(ValueError, match=r"^values hold a code out of range"):
        stats.distribution(np.array([2]), 2)
    assert stats.distribution(np.array([1]), 2).counts.tolist() == [0, 1]


def test_it_checks_agreement_arguments():
    ok = np.array([[0, 1], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match=r"^codes must be a units x coders matrix"):
        stats.agreement(np.array([0, 1, 1]), 2)
    with pytest.raises(ValueError, match=r"^n_categories must be a whole number of at least 1"):
        stats.agreement(ok, 0)
    with pytest.raises(ValueError, match=r"^chance_categories must be at least n_categories"):
        stats.agreement(ok, 3, chance_categories=2)
    with pytest.raises(ValueError, match=r"^chance_categories must be a whole number"):
        stats.agreement(ok, 2, chance_categories=2.0)
    with pytest.raises(ValueError, match=r"^codes hold a code out of range \(at least n_categories\)"):
        stats.agreement(ok, 1)
    assert stats.agreement(ok, 2, B=10, chance_categories=2).chance_categories == 2


def test_it_checks_interval_methods_and_their_inputs():
    d = paper_like()
    with pytest.raises(ValueError, match=r"^method must be one of beta_cr2_bm, svyciprop_beta, jeffreys_deff"):
        stats.cell_intervals(d, None, method="wald")
    with pytest.raises(ValueError, match=r"^reps: the percentile method needs replicate counts"):
        stats.cell_intervals(d, None, method="percentile")
    with pytest.raises(ValueError, match=r"^method must be one of"):
        stats.analytic_limits(np.array([0.1]), np.array([10.0]), "wald")
    with pytest.raises(ValueError, match=r"^the beta interval needs n of at least 2 and df of at least 1"):
        stats.analytic_limits(np.array([0.1]), np.array([10.0]), "beta_cr2_bm", n=10, df=0.5)
    with pytest.raises(ValueError, match=r"^the beta interval needs"):
        stats.analytic_limits(np.array([0.1]), np.array([10.0]), "beta_cr2_bm", n=1, df=3)
    with pytest.raises(ValueError, match=r"^the beta interval needs"):
        stats.analytic_limits(np.array([0.1]), np.array([10.0]), "beta_cr2_bm", n=10, df=3, df_upper=np.array([0.9]))
    assert stats.cell_intervals(d, None).enough  # the analytic default needs no replicates
    with pytest.raises(ValueError, match=r"^disagreeing must be between 0 and units"):
        stats.one_sided_disagreement(3, 2)
    with pytest.raises(ValueError, match=r"^disagreeing must be between 0 and units"):
        stats.one_sided_disagreement(-1, 2)
    with pytest.raises(ValueError, match=r"^disagreeing must be between 0 and units"):
        stats.one_sided_disagreement(0, 0)


# --- cell intervals: methods, edges and flags ---------------------------------


def test_it_takes_percentile_limits_at_the_stated_quantiles():
    d = paper_like(3)
    reps = stats.replicate_blocks([d], B=900, seed=2)[0]
    props = stats.replicate_proportions(reps)
    for level in (0.95, 0.8):
        boot = stats.cell_intervals(d, reps, level=level, method="percentile")
        lo, hi = np.quantile(props, [(1 - level) / 2, (1 + level) / 2], axis=0)
        assert np.array_equal(boot.low, lo) and np.array_equal(boot.high, hi)
        diff = stats.diff_intervals(d, paper_like(4), reps, stats.replicate_blocks([paper_like(4)], B=900, seed=3)[0],
                                    level=level)  # fmt: skip
        other = stats.replicate_proportions(stats.replicate_blocks([paper_like(4)], B=900, seed=3)[0])
        dlo, dhi = np.quantile(props - other, [(1 - level) / 2, (1 + level) / 2], axis=0)
        assert np.array_equal(diff.low, dlo) and np.array_equal(diff.high, dhi) and diff.method == "percentile"


def reference_df(m, icc, level=0.95, cap=None):
    """The default's degrees of freedom from G x G matrices (eigenvalues, as the papers write it).

    Clusters with Var u_g = m_g (1 + (m_g - 1) icc); residuals e = (I - h 1') u, O = W^1/2 Cov(e) W^1/2; r = e minus
    its regression b (1' u) on the error, O_r likewise. The remainder's df are df_r = tr(O_r)^2 / tr(O_r O_r)
    (clipped to [1, G - 1]; with `cap`, the upper limit's figure, at most max(cap, 1), and then tr(O_r O_r) is
    read back as tr(O_r)^2 / df_r). The smaller of tr(O)^2 / tr(O_r O_r) and the df whose t quantile is c,
    c^2 = tau^2 S / (tr O_r + tau^2 S b'Wb), tau the t quantile on df_r (found by root search); each clipped to
    [1, G - 1].
    """
    from scipy import optimize
    from scipy import stats as st

    m = np.array([x for x in m if x > 0], dtype=float)
    G, N = len(m), m.sum()
    V = np.diag(m * (1 + (m - 1) * icc))
    S = V.sum()
    A = np.eye(G) - np.outer(m / N, np.ones(G))
    cov_e = A @ V @ A.T
    b = A @ V @ np.ones(G) / S
    cov_r = cov_e - np.outer(b, b) * S
    W = np.diag(1 / (1 - m / N))
    lam = np.linalg.eigvalsh(W**0.5 @ cov_e @ W**0.5)
    lam_r = np.linalg.eigvalsh(W**0.5 @ cov_r @ W**0.5)
    df_r = min(max(lam_r.sum() ** 2 / (lam_r**2).sum(), 1), G - 1)
    if cap is not None:
        df_r = min(df_r, max(cap, 1))
    spread = min(max(lam.sum() ** 2 / (lam_r.sum() ** 2 / df_r), 1), G - 1)
    q = 1 - (1 - level) / 2
    tau = st.t.ppf(q, df_r)
    c = (tau**2 * S / (lam_r.sum() + tau**2 * S * (b @ W @ b))) ** 0.5
    if c <= st.t.ppf(q, G - 1):
        ceiling = G - 1
    elif c >= st.t.ppf(q, 1):
        ceiling = 1.0
    else:
        ceiling = optimize.brentq(lambda d: st.t.ppf(q, d) - c, 1, G - 1, xtol=1e-14, rtol=1e-15)
    return min(spread, ceiling)


def reference_cellwise(counts, level=0.95):
    """Plain-Python reference of the default interval, cell by cell, with the degrees of freedom from G x G matrices.

    CR2 variance sum_g (y_g - p m_g)^2 / (1 - h_g) / N^2; deff = variance / (p (1 - p) / N) floored at 1, capped
    at sum m^2 / N; the cell's icc = (deff - 1) / (cap - 1); df = reference_df; where the cell shows clustering,
    the upper limit's df are reference_df with the remainder's df at most (Kish's effective clusters - 1), and at
    most df; Korn-Graubard beta limits; the exact binomial bound on N for an empty (or full) cell.
    """
    from scipy import stats as st

    G, K = len(counts), len(counts[0])
    m = [sum(r) for r in counts]
    N = sum(m)
    h = [x / N for x in m]
    cap = max(1.0, sum(x * x for x in m) / N)
    a = 1 - level
    out = []
    for k in range(K):
        y = [r[k] for r in counts]
        p = sum(y) / N
        if p in (0, 1):
            df = reference_df(m, 0.0, level)
            none = st.beta.ppf(1 - a / 2, 1, N)
            out.append((0.0, none, df, df) if p == 0 else (1 - none, 1.0, df, df))
            continue
        v = sum((y[g] - p * m[g]) ** 2 / (1 - h[g]) for g in range(G)) / N**2
        raw = v / (p * (1 - p) / N)
        deff = min(max(raw, 1.0), cap)
        icc = (deff - 1) / (cap - 1) if cap > 1 else 0.0
        df = reference_df(m, icc, level)
        carried = sum(1 for x in y if x > 0)
        worth = sum(y) ** 2 / sum(x * x for x in y)  # Kish's effective number of clusters
        df_up = min(df, reference_df(m, icc, level, cap=worth - 1)) if raw > 1 and sum(y) > carried else df
        limits = []
        for d, side in ((df, 0), (df_up, 1)):
            n = N / deff * (st.t.ppf(1 - a / 2, N - 1) / st.t.ppf(1 - a / 2, d)) ** 2
            x = p * n
            limits.append(st.beta.ppf(a / 2, x, n - x + 1) if side == 0 else st.beta.ppf(1 - a / 2, x + 1, n - x))
        out.append((limits[0], limits[1], df, df_up))
    return out


def test_it_computes_the_default_interval_like_a_plain_reference_cell_by_cell():
    cells = [0, 0, 1, 0, 2, 0, 0, 1, 1, 0, 0, 2, 0, 1, 0, 0, 4, 4, 4, 4, 4, 0, 5, 5]
    clusters = ["a", "a", "a", "b", "b", "c", "c", "c", "c", "d", "e", "e", "f", "f", "g", "h"] + ["a"] * 4
    clusters += ["h", "h", "b", "g"]
    d = design(cells, clusters, K=6)  # cell 3 is empty; cell 4 sits in one cluster; cell 5's 2 records in 2
    for level in (0.95, 0.9):
        iv = stats.cell_intervals(d, None, level=level)
        assert iv.method == "beta_cr2_bm"
        for k, (lo, hi, df, df_up) in enumerate(reference_cellwise(d.counts.tolist(), level)):
            assert iv.low[k] == pytest.approx(lo, abs=1e-10) and iv.high[k] == pytest.approx(hi, abs=1e-10), k
            assert iv.df[k] == pytest.approx(df, rel=1e-9) and iv.df_upper[k] == pytest.approx(df_up, rel=1e-9)
    eff = stats.effective_sizes(d)
    # Cell 4 sits in one cluster (Kish: 1): its remainder rests on 1 df; the cluster's 29% of the records add a little.
    assert 1.0 < eff.df_upper[4] < 1.2 and eff.df_upper[0] == pytest.approx(eff.df[0]) and eff.df[0] < 7
    # Records each in a cluster of their own show no clustering: the upper limit keeps the design's df.
    assert eff.deff[5] > 1 and eff.df_upper[5] == eff.df[5]
    one = stats.effective_sizes(design([0] * 30 + [1], [f"r{i % 10}" for i in range(31)], K=2))
    assert one.df_upper[1] == one.df[1] > 8
    assert eff.deff_cap == pytest.approx(sum(x * x for x in d.sizes.tolist()) / d.n)


def test_it_computes_jeffreys_and_wilson_on_the_cells_own_effective_size():
    from scipy import stats as st

    d = paper_like(7)
    eff = stats.effective_sizes(d)
    p = d.totals / d.n
    for level in (0.95, 0.9):
        a = 1 - level
        z = st.norm.ppf(1 - a / 2)
        jf = stats.cell_intervals(d, None, level=level, method="jeffreys_deff")
        wl = stats.cell_intervals(d, None, level=level, method="wilson_deff")
        for k in range(4):
            n, x = eff.n_eff[k], p[k] * eff.n_eff[k]
            lo = st.beta.ppf(a / 2, x + 0.5, n - x + 0.5) if x > 0 else 0.0
            hi = st.beta.ppf(1 - a / 2, x + 0.5, n - x + 0.5)
            assert (jf.low[k], jf.high[k]) == (pytest.approx(lo, abs=1e-10), pytest.approx(hi, abs=1e-10))
            c = (p[k] + z * z / (2 * n)) / (1 + z * z / n)
            h = z * np.sqrt(p[k] * (1 - p[k]) / n + z * z / (4 * n * n)) / (1 + z * z / n)
            assert (wl.low[k], wl.high[k]) == (pytest.approx(max(0, c - h), abs=1e-12), pytest.approx(c + h, abs=1e-12))


def svyciprop_beta_reference(y, cluster, level=0.95):
    """R's survey::svyciprop(method = "beta") for svydesign(ids = ~cluster), transcribed record by record.

    svymean: average = mean(y); x = (y - average) / N summed within PSUs (rowsum), centred, crossprod times
    nPSU / (nPSU - 1) (svyrecvar's one-stage, with-replacement rule). n.eff = p (1 - p) / var; n.eff times
    (qt(alpha / 2, nrow(design) - 1) / qt(alpha / 2, degf(design)))^2 with degf = nPSU - 1; limits
    qbeta(alpha / 2, n.eff p, n.eff (1 - p) + 1) and qbeta(1 - alpha / 2, n.eff p + 1, n.eff (1 - p)).
    """
    from scipy import stats as st

    n = len(y)
    average = sum(y) / n
    psu: dict[str, float] = {}
    for yi, g in zip(y, cluster, strict=True):
        psu[g] = psu.get(g, 0.0) + (yi - average) / n
    G = len(psu)
    centre = sum(psu.values()) / G
    var = sum((z - centre) ** 2 for z in psu.values()) * G / (G - 1)
    alpha = 1 - level
    n_eff = average * (1 - average) / var
    n_eff *= (st.t.ppf(alpha / 2, n - 1) / st.t.ppf(alpha / 2, G - 1)) ** 2
    lo = st.beta.ppf(alpha / 2, n_eff * average, n_eff * (1 - average) + 1)
    hi = st.beta.ppf(1 - alpha / 2, n_eff * average + 1, n_eff * (1 - average))
    return float(lo), float(hi), var


# The worked example of docs/intervals.md: 8 repositories, 40 episodes, 4 cells (cell 3 empty).
WORKED_REPOS = ["r1"] * 12 + ["r2"] * 8 + ["r3"] * 6 + ["r4"] * 4 + ["r5"] * 4 + ["r6"] * 3 + ["r7"] * 2 + ["r8"]
WORKED_CELLS = (
    [0] * 9 + [1] * 3 + [0] * 2 + [1] * 4 + [2] * 2 + [0] * 5 + [2] + [0] * 3 + [1] + [1] * 4 + [0, 0, 2] + [0, 1] + [0]
)


def test_it_matches_r_svyciprop_beta_on_the_worked_example():
    d = design(WORKED_CELLS, WORKED_REPOS)
    assert d.n == 40 and d.n_clusters == 8 and d.totals.tolist() == [23, 13, 4, 0]
    for level in (0.95, 0.9):
        iv = stats.cell_intervals(d, None, level=level, method="svyciprop_beta")
        r = stats.svyciprop_sizes(d)
        assert iv.df.tolist() == [7.0] * 4 and r.df == 7.0
        for k in range(3):
            lo, hi, var = svyciprop_beta_reference([int(c == k) for c in WORKED_CELLS], WORKED_REPOS, level)
            assert r.variance[k] == pytest.approx(var, rel=1e-12)
            assert (iv.low[k], iv.high[k]) == (pytest.approx(lo, abs=1e-10), pytest.approx(hi, abs=1e-10)), k
        # R's n.eff is 0 / 0 for the empty cell (NaN limits): the full N stands in, the exact binomial bound.
        upper, _ = stats.exact_binomial_bounds(40, level=level)
        assert iv.low[3] == 0 and iv.high[3] == pytest.approx(upper, rel=1e-12) and r.n_eff[3] == 40
    # The pinned figures docs/intervals.md shows (95%).
    iv = stats.cell_intervals(d, None, method="svyciprop_beta")
    assert [round(x, 4) for x in iv.low[:3]] == [0.2785, 0.1121, 0.0158]
    assert [round(x, 4) for x in iv.high[:3]] == [0.8361, 0.6098, 0.2939]
    default = stats.cell_intervals(d, None)
    assert [round(x, 4) for x in default.low] == [0.2034, 0.0791, 0.0078, 0.0]
    assert [round(x, 2) for x in default.df] == [3.58, 3.71, 4.05, 4.6]
    assert [round(x, 2) for x in default.df_upper] == [3.45, 3.07, 1.69, 4.6]
    assert [round(x, 4) for x in default.high] == [0.8949, 0.7089, 0.6636, 0.0881]


def test_it_keeps_a_cells_interval_when_other_cells_are_merged_or_split():
    rng = np.random.default_rng(5)
    sizes = 1 + rng.poisson(6, 30) * (rng.random(30) < 0.6)
    sizes[0] = 80  # a dominant repository
    cells = np.concatenate([rng.choice(5, size=s, p=[0.5, 0.2, 0.15, 0.1, 0.05]) for s in sizes])
    clusters = np.repeat(np.array([f"r{i:02d}" for i in range(30)], dtype=object), sizes)
    split = design(cells, clusters, K=5)
    merged = design(np.minimum(cells, 2), clusters, K=3)  # cells 2, 3, 4 become one
    regrouped = design(np.where(cells == 1, 1, np.where(cells == 0, 0, 2)), clusters, K=3)
    for method in ("beta_cr2_bm", "svyciprop_beta", "jeffreys_deff", "wilson_deff"):
        a, b, c = (stats.cell_intervals(x, None, method=method) for x in (split, merged, regrouped))
        for k in (0, 1):  # cells 0 and 1 are the same records in all three designs
            assert a.low[k] == b.low[k] == c.low[k] and a.high[k] == b.high[k] == c.high[k], (method, k)
            assert a.df[k] == b.df[k] and a.df_upper[k] == b.df_upper[k] and a.n_eff[k] == b.n_eff[k]
        assert a.low[2] != b.low[2]  # the merged cell is another cell
    # The pooled rule this replaces moved cell 0 when others merged: the instrument can tell.
    e2 = ((split.counts - np.outer(split.sizes, split.totals / split.n)) ** 2).sum()
    e2m = ((merged.counts - np.outer(merged.sizes, merged.totals / merged.n)) ** 2).sum()
    assert not np.isclose(e2, e2m)


def test_it_caps_the_design_effect_so_a_dominant_repository_cannot_push_past_full_clustering():
    # One repository holds 60% of the records, all in cell 1; the rest spread evenly with no records in cell 1.
    d = design([1] * 60 + [0, 2] * 20, ["big"] * 60 + [f"s{i}" for i in range(40)], K=3)
    eff = stats.effective_sizes(d)
    cap = (60**2 + 40) / 100
    assert eff.deff_cap == pytest.approx(cap)
    C, m = d.counts.astype(float), d.sizes.astype(float)
    p = C.sum(axis=0) / 100
    raw = ((C - np.outer(m, p)) ** 2 / (1 - m / 100)[:, None]).sum(axis=0) / 100**2 / (p * (1 - p) / 100)
    assert raw[1] > cap and eff.deff[1] == pytest.approx(cap) and eff.n_eff[1] == pytest.approx(100 / cap)
    assert eff.deff[0] == pytest.approx(raw[0]) and eff.deff[0] < cap  # the cap bites only where it must
    # Dominance still costs degrees of freedom, not a design effect beyond full clustering.
    assert stats.bell_mccaffrey_df(d.sizes) < 3 and stats.cell_intervals(d, None).high[1] <= 1


def test_it_takes_bell_mccaffrey_degrees_of_freedom_from_the_cluster_sizes():
    assert stats.bell_mccaffrey_df(np.array([4] * 10)) == pytest.approx(9)  # equal sizes: G - 1
    assert stats.bell_mccaffrey_df(np.array([3, 0, 3])) == pytest.approx(1)  # empty clusters do not count
    assert stats.bell_mccaffrey_df(np.array([7])) == 1.0
    skew = np.array([250] + [1] * 50)
    m, N = skew.astype(float), 300.0
    w = 1 / (1 - m / N)
    omega = np.sqrt(np.outer(w, w)) * (np.diag(m) - np.outer(m, m) / N)
    assert stats.bell_mccaffrey_df(skew) == pytest.approx(np.trace(omega) ** 2 / np.trace(omega @ omega), rel=1e-12)
    assert 1 < stats.bell_mccaffrey_df(skew) < 3
    # Without clustering the default's degrees of freedom are these.
    d = design([0, 1] * 150, [f"r{i // 2 % 12}" for i in range(250)] + [f"s{i // 2}" for i in range(50)], K=2)
    eff = stats.effective_sizes(d)
    assert eff.deff.tolist() == [1.0, 1.0] and eff.df.tolist() == [pytest.approx(stats.bell_mccaffrey_df(d.sizes))] * 2


def test_it_gives_cells_without_variance_of_their_own_no_design_effect():
    one = stats.effective_sizes(design([0, 1, 0, 2], ["a"] * 4, K=4))  # one cluster: no between-cluster variance
    assert one.deff.tolist() == [1.0] * 4 and one.n_eff.tolist() == [4.0] * 4
    single = stats.effective_sizes(design([0, 1, 0, 1, 2], ["a", "b", "c", "d", "e"], K=4))
    assert single.deff_cap == 1.0 and single.deff.tolist() == [1.0] * 4  # one record per cluster; cell 3 empty
    assert single.n_eff[3] == 5.0


def test_it_reads_a_cells_intra_cluster_correlation_from_its_design_effect():
    sizes = np.array([10, 5, 5])  # sum m^2 / N = 150 / 20 = 7.5, the design effect of full clustering
    icc = stats.cell_icc(np.array([0.5, 1.0, 4.25, 7.5, 9.0]), sizes)
    assert icc.dtype == np.float64 and icc.tolist() == [0.0, 0.0, 0.5, 1.0, 1.0]
    assert stats.cell_icc(np.array([2.0]), np.array([1, 1, 1])).tolist() == [0.0]  # one record each: no clustering
    assert stats.cell_icc(np.array([1.25]), np.array([2, 1, 1])).tolist() == [0.5]  # full clustering's deff is 1.5
    assert stats.cell_icc(np.array([2.0]), np.array([0, 0])).tolist() == [0.0]


def test_it_computes_the_degrees_of_freedom_like_the_matrix_reference():
    one = np.array([600] + [6] * 150)
    several = np.array([300, 250, 200, 150, 100] + [10] * 50)
    extreme = np.array([250] + [1] * 50)
    equal = np.array([4] * 10)
    for sizes, iccs in ((one, [0.0, 0.2]), (several, [0.2]), (extreme, [1.0]), (equal, [0.5])):
        for level in (0.95, 0.9):
            got = stats.clustered_df(sizes, iccs, level=level)
            assert got.shape == (len(iccs),)
            for g, icc in zip(got, iccs, strict=True):
                assert g == pytest.approx(reference_df(sizes, icc, level), rel=1e-8), (sizes[:3], icc, level)
    for sizes, icc in ((np.array([10, 1, 1]), 0.5), (np.array([6, 2, 1]), 0.0)):  # a spread below 2
        assert stats.clustered_df(sizes, [icc])[0] == pytest.approx(reference_df(sizes, icc), rel=1e-8)
    # c can pass t_1's quantile (its df would be 0.98): the ceiling is clipped to 1 like the spread.
    assert stats.clustered_df(np.array([1248, 3, 4]), [0.129]).tolist() == [1.0] == [reference_df([1248, 3, 4], 0.129)]
    # Clusters without records count for nothing, also in the clips.
    assert (
        stats.clustered_df(np.append(one, [0, 0]), [0.2, 0.0]).tolist() == stats.clustered_df(one, [0.2, 0.0]).tolist()
    )
    # The ceiling depends on the level (its quantile), the spread does not.
    assert stats.clustered_df(extreme, [1.0], level=0.9)[0] != stats.clustered_df(extreme, [1.0])[0]
    assert stats.clustered_df(np.array([5]), [0.3, 0.0]).tolist() == [1.0, 1.0]  # one cluster: 1
    assert stats.clustered_df(np.array([3, 0, 3]), [0.0]).tolist() == [1.0]  # empty clusters do not count
    assert stats.clustered_df(equal, [0.0, 0.9]) == pytest.approx([9.0, 9.0], rel=1e-12)  # equal sizes: G - 1, any icc


def test_it_lets_a_dominant_repositorys_share_of_the_variance_count_as_known_up_to_its_ratio():
    from scipy import stats as st

    one = np.array([600] + [6] * 150)  # one repository holds 40% of the records
    several = np.array([300, 250, 200, 150, 100] + [10] * 50)  # several large ones share the variance
    for sizes in (one, several, np.array([4] * 10)):
        # Independent records: the residuals are independent of the error, and the figure is Bell-McCaffrey's.
        assert stats.clustered_df(sizes, [0.0])[0] == pytest.approx(stats.bell_mccaffrey_df(sizes), rel=1e-9)
    # With clustering, the dominant repository's residual is most of both the error and the variance estimate:
    # the t ratio cannot be large while the estimate is small, so far more than Bell-McCaffrey's 6 df (the
    # one-repository-with-40% scenario over-covered at 97-97.5% on those 6)...
    bm = stats.bell_mccaffrey_df(one)
    assert bm < 7 and stats.clustered_df(one, [0.2])[0] > 4 * bm
    # ... while several large repositories sharing the variance leave fewer than Bell-McCaffrey's.
    assert stats.clustered_df(several, [0.2])[0] < 0.8 * stats.bell_mccaffrey_df(several)
    # Past a share of 0.74 the dominant part's own ratio, 1 / sqrt(1 - h), exceeds the normal quantile: the t
    # quantile of the df reaches it (the ceiling), instead of the 50 the spread alone would give.
    d = design([0] * 250 + [1] * 50, ["big"] * 250 + [f"s{i}" for i in range(50)], K=2)
    eff = stats.effective_sizes(d)
    assert stats.cell_icc(eff.deff, d.sizes).tolist() == [1.0, 1.0]
    assert 5 < eff.df[0] < 7 and st.t.ppf(0.975, eff.df[0]) == pytest.approx(1 / np.sqrt(1 - 250 / 300), rel=1e-2)
    assert st.t.ppf(0.95, stats.effective_sizes(d, level=0.9).df[0]) >= 1 / np.sqrt(1 - 250 / 300) - 1e-3
    assert stats.cell_icc(np.array([1.0, 3.0]), np.array([1, 1, 1])).tolist() == [0.0, 0.0]  # no clustering possible


def dominant_design():
    """One repository with 600 of 1,500 records and 150 with 6 each; cell mixes drawn around 40/30/5/25%."""
    rng = np.random.default_rng(31)
    sizes = np.array([600] + [6] * 150)
    mix = rng.dirichlet(np.array([0.4, 0.3, 0.05, 0.25]) * 5, size=sizes.size)
    counts = np.array([rng.multinomial(s, p) for s, p in zip(sizes, mix, strict=True)])
    cells = np.concatenate([np.repeat(np.arange(4), c) for c in counts])
    return design(cells, np.repeat(np.array([f"r{i:03d}" for i in range(sizes.size)], dtype=object), sizes))


def test_it_does_not_let_a_dominant_repository_cut_the_upper_limits_degrees_of_freedom_to_its_kish_count():
    d = dominant_design()
    assert d.counts[0].tolist() == [111, 217, 0, 272] and d.totals.tolist() == [466, 456, 58, 520]
    eff, ec = stats.effective_sizes(d), stats.effective_clusters(d)
    # The big repository makes cells 1 and 3 "4.35 and 3.62 clusters' worth" (Kish). The old rule rested their upper
    # limits on ec - 1 df; that repository's residual moves with the error, so only the remainder's df are capped.
    assert ec[1] < 5 and ec[3] < 4 and eff.df[1] > 20 and eff.df[3] > 90
    old = np.minimum(eff.df, np.maximum(ec - 1, 1))
    assert old[1] < 3.4 and old[3] < 2.7
    assert eff.df_upper[1] == pytest.approx(eff.df[1], rel=1e-12) and eff.df_upper[3] > 0.99 * eff.df[3]
    iv = stats.cell_intervals(d, None)
    _, hi_old = stats.korn_graubard_limits(d.totals / d.n, eff.n_eff, d.n, eff.df, old)
    width, width_old = iv.high - iv.low, hi_old - iv.low
    assert width[1] < 0.8 * width_old[1] and width[3] < 0.7 * width_old[3]
    # The same figures from G x G matrices (151 clusters), cell by cell.
    for k, (lo, hi, df, df_up) in enumerate(reference_cellwise(d.counts.tolist())):
        assert (iv.low[k], iv.high[k]) == (pytest.approx(lo, abs=1e-10), pytest.approx(hi, abs=1e-10)), k
        assert iv.df[k] == pytest.approx(df, rel=1e-8) and iv.df_upper[k] == pytest.approx(df_up, rel=1e-8), k


def test_it_keeps_the_kish_cap_on_the_upper_limit_where_no_residual_moves_with_the_error():
    # Equal sizes: every b_g is 0, the remainder is the whole variance estimate, and the upper limit's df are
    # min(df, Kish's effective clusters - 1) exactly, as before the dominant-repository change.
    rng = np.random.default_rng(7)
    mix = rng.dirichlet(np.array([0.6, 0.3, 0.1]) * 2, size=12)
    counts = np.array([rng.multinomial(20, p) for p in mix])
    cells = np.concatenate([np.repeat(np.arange(3), c) for c in counts])
    d = design(cells, np.repeat(np.array([f"r{i}" for i in range(12)], dtype=object), 20), K=3)
    eff, ec = stats.effective_sizes(d), stats.effective_clusters(d)
    capped = np.minimum(eff.df, np.maximum(ec - 1, 1))
    assert np.any(capped < eff.df)  # the cap bites on some cell
    assert eff.df_upper == pytest.approx(capped, rel=1e-9)
    cap = np.array([2.5, 0.0, 40.0])  # below 1 counts as 1; above the remainder's df changes nothing
    base = stats.clustered_df(d.sizes, [0.3] * 3)
    got = stats.clustered_df(d.sizes, [0.3] * 3, remainder_cap=cap)
    assert got == pytest.approx([2.5, 1.0, base[2]], rel=1e-9)


def test_it_refuses_analytic_limits_for_a_bootstrap_method_naming_the_analytic_ones():
    for method in ("percentile", "bca"):
        with pytest.raises(ValueError) as err:
            stats.analytic_limits(np.array([0.2]), np.array([10.0]), method)
        assert str(err.value) == "method must be one of beta_cr2_bm, svyciprop_beta, jeffreys_deff, wilson_deff"


def test_it_takes_bell_mccaffrey_df_of_clusters_in_the_millions_without_integer_overflow():
    # m^3 of a 3,000,000-record cluster passes int64's range: the sums must be taken in floating point.
    sizes = np.array([3_000_000, 1_000_000, 1_000_000])
    m = sizes.astype(float)
    N, w = m.sum(), 1 / (1 - m / m.sum())
    tr2 = (w * w * m * m).sum() - 2 * (w * w * m**3).sum() / N + (w * m * m).sum() ** 2 / N**2
    assert stats.bell_mccaffrey_df(sizes) == pytest.approx(min(max(N * N / tr2, 1), 2), rel=1e-12)
    assert 1 < stats.bell_mccaffrey_df(sizes) < 2


def test_it_gives_a_cell_holding_every_record_its_designs_df_on_both_limits():
    # A full cell has no variance of its own (deff 1): the upper limit is not "clustered", whatever Kish says.
    d = design([0] * 10, ["a"] * 5 + ["b"] * 3 + ["c", "d"], K=2)
    eff = stats.effective_sizes(d)
    assert eff.deff.tolist() == [1.0, 1.0] and stats.effective_clusters(d)[0] < 3
    assert eff.df_upper[0] == eff.df[0] > 1.5


def test_it_counts_only_clusters_with_records_in_rs_degrees_of_freedom():
    d = design([0, 1, 0, 0, 1, 2], ["a", "a", "b", "c", "c", "d"], K=3)
    padded = stats.ClusterDesign(
        np.vstack([d.counts, np.zeros((2, 3), dtype=d.counts.dtype)]), (*d.names, "y", "z"), d.cells, d.episode_cluster
    )
    assert stats.svyciprop_sizes(padded).df == stats.svyciprop_sizes(d).df == 3.0
    assert stats.svyciprop_sizes(padded).variance.tolist() == pytest.approx(
        (stats.svyciprop_sizes(d).variance).tolist(), rel=1e-12
    )


def test_it_gives_no_nan_estimate_for_a_difference_with_an_empty_kind():
    a = design([0, 1, 1, 0, 2], ["a", "b", "c", "d", "e"], K=3)
    empty = design(np.array([], dtype=int), np.array([], dtype=object), K=3)
    for x, y in ((a, empty), (empty, a)):
        with np.errstate(all="raise"):
            res = stats.diff_intervals(x, y, None, None)
        assert not res.enough and np.isfinite(res.estimate).all()


def test_it_bounds_an_empty_cell_by_the_exact_binomial_on_all_records():
    from scipy import stats as st

    # Skewed repositories with strong clustering: the old pooled design effect gave this empty cell a bound near 30%.
    d = design([0] * 70 + [1] * 5 + [0, 1] * 10, ["big"] * 70 + ["b2"] * 5 + [f"s{i}" for i in range(20)], K=3)
    for level in (0.95, 0.9):
        upper = st.beta.ppf(1 - (1 - level) / 2, 1, 95)
        assert stats.exact_binomial_bounds(95, level=level) == (pytest.approx(upper), pytest.approx(1 - upper))
        for method in stats.BETA_METHODS:
            iv = stats.cell_intervals(d, None, level=level, method=method)
            assert iv.low[2] == 0 and iv.high[2] == pytest.approx(upper, rel=1e-12), method
    assert stats.exact_binomial_bounds(95)[0] == pytest.approx(1 - 0.025 ** (1 / 95))
    assert 0.03 < stats.exact_binomial_bounds(95)[0] < 0.04  # the rule of three's neighbourhood, not 30%
    full = design([1] * 8, [f"r{i % 4}" for i in range(8)], K=2)
    iv = stats.cell_intervals(full, None)
    assert (
        iv.high[1] == 1
        and iv.low[1] == pytest.approx(0.025 ** (1 / 8))
        and iv.high[0] == pytest.approx(1 - 0.025 ** (1 / 8))
    )


def test_it_flags_intervals_resting_on_fewer_than_five_clusters():
    # Cell 0 has records in 4 clusters, cell 1 in 5 (one each), cell 2 in none, cell 3 in 6 of which one holds 20.
    cells = [0, 0, 0, 0, 1, 1, 1, 1, 1] + [3] * 25
    clusters = ["a", "b", "c", "d", "a", "b", "c", "d", "e"] + ["a"] * 20 + ["b", "c", "d", "e", "f"]
    d = design(cells, clusters, K=4)
    iv = stats.cell_intervals(d, None)
    assert iv.clusters_with_records.tolist() == [4, 5, 0, 6]
    # Kish's effective number: (sum y)^2 / sum y^2; 25^2 / (20^2 + 5) for cell 3.
    assert iv.effective_clusters.tolist() == [4.0, 5.0, 0.0, pytest.approx(625 / 405)]
    assert iv.few_clusters.tolist() == [True, False, True, True]
    for method in stats.CELL_METHODS:  # the flag belongs to the data, not to the method
        reps = stats.replicate_blocks([d], B=50, seed=1)[0]
        assert stats.cell_intervals(d, reps, method=method).few_clusters.tolist() == [True, False, True, True]
    d = design(cells[:9], clusters[:9], K=3)
    other = design([0] * 6 + [1] * 6, [f"o{i}" for i in range(12)], K=3)
    reps = stats.replicate_blocks([d, other], B=50, seed=1)
    diff = stats.diff_intervals(d, other, *reps)
    assert diff.few_clusters.tolist() == [True, False, True]
    lonely = design([0, 1], ["a", "a"], K=3)
    iv = stats.cell_intervals(lonely, None)
    assert not iv.enough and iv.reason == "fewer than 2 clusters: the bootstrap cannot resample"
    assert iv.few_clusters.all() and iv.clusters_with_records.tolist() == [1, 1, 0]
    empty = stats.diff_intervals(lonely, other, *stats.replicate_blocks([lonely, other], B=10, seed=1))
    assert not empty.enough and empty.few_clusters.all()
    assert empty.reason == "a: fewer than 2 clusters: the bootstrap cannot resample"


def test_it_keeps_bca_as_the_old_flag_and_names_every_method():
    d = paper_like()
    reps = stats.replicate_blocks([d], B=200, seed=1)[0]
    assert stats.cell_intervals(d, reps, bca=True).method == "bca"
    assert stats.cell_intervals(d, reps).method == stats.DEFAULT_CELL_METHOD == "beta_cr2_bm"
    assert set(stats.CELL_METHOD_NAMES) == set(stats.CELL_METHODS) == set(stats.CELL_METHOD_LABELS)
    old = stats.cell_intervals(d, reps, method="korn_graubard")  # the old name of the default still works
    assert old.method == "beta_cr2_bm" and np.array_equal(old.high, stats.cell_intervals(d, reps).high)
    assert stats.canonical_method("korn_graubard") == "beta_cr2_bm" and stats.canonical_method("bca") == "bca"
    assert stats.diff_intervals(d, d, reps, reps, bca=True).method == "bca"


def test_it_computes_bca_limits_at_the_edges_like_the_slow_reference():
    est = np.array([0.5, 0.5, 0.5])
    rng = np.random.default_rng(0)
    reps = np.column_stack([
        rng.uniform(0.6, 0.9, 400),  # every replicate above the estimate: z0 clipped at 1 / (B + 1)
        rng.uniform(0.1, 0.4, 400),  # every replicate below: clipped at B / (B + 1)
        np.r_[np.full(200, 0.5), rng.uniform(0.0, 1.0, 200)],  # ties count half
    ])  # fmt: skip
    jack = np.column_stack([rng.normal(0, 1, 30) ** 3, rng.normal(0, 1, 30), np.zeros(30)])
    lo, hi = bootstrap._bca(reps, est, jack, 0.95)
    for k in range(3):
        ref = slow_bca(reps[:, k].tolist(), 0.5, jack[:, k].tolist())
        assert (lo[k], hi[k]) == (pytest.approx(ref[0], abs=1e-12), pytest.approx(ref[1], abs=1e-12))
    # A huge acceleration pushes the limits to the smallest and largest replicates.
    lo, hi = bootstrap._bca(reps[:, :1], est[:1], np.r_[np.zeros(29), 50.0][:, None], 0.95)
    ref = slow_bca(reps[:, 0].tolist(), 0.5, [0.0] * 29 + [50.0])
    assert (lo[0], hi[0]) == (pytest.approx(ref[0], abs=1e-12), pytest.approx(ref[1], abs=1e-12))


def test_it_computes_bca_for_differences_with_the_jackknife_of_both_kinds():
    a, b = paper_like(5, n_clusters=40), paper_like(6, n_clusters=30)
    ra, rb = stats.replicate_blocks([a, b], B=1500, seed=4)
    diff = stats.diff_intervals(a, b, ra, rb, bca=True)
    d = stats.replicate_proportions(ra) - stats.replicate_proportions(rb)
    pa, pb = a.totals / a.n, b.totals / b.n
    jack = np.vstack([bootstrap._jackknife_props(a) - pb, pa - bootstrap._jackknife_props(b)])
    for k in range(4):
        lo, hi = slow_bca(d[:, k].tolist(), pa[k] - pb[k], jack[:, k].tolist())
        assert diff.low[k] == pytest.approx(lo, abs=1e-12) and diff.high[k] == pytest.approx(hi, abs=1e-12)
    plain = stats.diff_intervals(a, b, ra, rb)
    assert not np.allclose(plain.low, diff.low)


# --- replicate engine paths -------------------------------------------------


def test_it_switches_to_float64_when_float32_sums_could_be_inexact(monkeypatch):
    d = paper_like(2)
    assert bootstrap._plan(d).dtype is np.float32
    single = stats.replicate_blocks([d], B=300, seed=6)[0]
    monkeypatch.setattr(bootstrap, "FLOAT32_EXACT", d.n_clusters * int(d.sizes.max()))
    assert bootstrap._plan(d).dtype is np.float64  # G * biggest no longer below the limit
    assert np.array_equal(stats.replicate_blocks([d], B=300, seed=6)[0], single)
    monkeypatch.setattr(bootstrap, "FLOAT32_EXACT", d.n_clusters * int(d.sizes.max()) + 1)
    assert bootstrap._plan(d).dtype is np.float32


def test_it_falls_back_on_exact_row_grouping_when_row_hashes_collide(monkeypatch):
    d = paper_like(4, n_clusters=120)
    C = np.asarray(d.counts)
    rows, mult = bootstrap._unique_rows(C)
    ref_rows, ref_mult = np.unique(C, axis=0, return_counts=True)
    as_set = lambda r, m: sorted(zip(map(tuple, r.tolist()), m.tolist(), strict=True))  # noqa: E731
    assert as_set(rows, mult) == as_set(ref_rows, ref_mult)
    # Every row hashes to its sum: rows (1, 0, ...) and (0, 1, ...) collide and must not be merged.
    monkeypatch.setattr(bootstrap, "_ROW_HASH", np.ones((2, 4096), dtype=np.uint64))
    rows, mult = bootstrap._unique_rows(C)
    assert as_set(rows, mult) == as_set(ref_rows, ref_mult)
    wide = np.zeros((3, 5000), dtype=np.int64)
    wide[0, 4999] = wide[2, 4999] = 1
    rows, mult = bootstrap._unique_rows(wide)
    assert rows.shape == (2, 5000) and sorted(mult.tolist()) == [1, 2]
    rows, mult = bootstrap._unique_rows(np.zeros((0, 3), dtype=np.int64))
    assert rows.shape == (0, 3) and mult.size == 0


def test_it_draws_large_designs_in_bounded_sub_chunks_with_the_right_distribution(monkeypatch):
    # More light clusters than LIGHT_CELLS / BLOCK: each block is drawn in several row chunks.
    rng = np.random.default_rng(8)
    G = 300
    sizes = rng.integers(1, 9, G)
    cells = np.concatenate([rng.integers(0, 4, s) for s in sizes])
    d = design(cells, np.repeat([f"r{i:03d}" for i in range(G)], sizes))
    plan = bootstrap._plan(d)
    monkeypatch.setattr(bootstrap, "LIGHT_CELLS", plan.light_rows.shape[0] * 10)  # 10 rows per sub-chunk
    B = 2000
    reps = stats.replicate_blocks([d], B=B, seed=5)[0]
    assert np.array_equal(reps, stats.replicate_blocks([d], B=B, seed=5, threads=2)[0])
    # Exact moments of a with-replacement cluster sample: mean G * mean row, variance G * var row.
    C = np.asarray(d.counts, dtype=float)
    assert reps.mean(axis=0) == pytest.approx(G * C.mean(axis=0), rel=0.01)
    assert reps.var(axis=0) == pytest.approx(G * C.var(axis=0), rel=0.1)
    assert (reps.sum(axis=1) > 0).all()


# --- agreement: Gwet's generalised formulas, undefined replicates, perfect agreement


def gen_codes(seed, U, R, Q, missing):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, Q, U)
    codes = np.where(rng.random((U, R)) < 0.55, truth[:, None], rng.integers(0, Q, (U, R)))
    codes[rng.random((U, R)) < missing] = -1
    return codes


# irrCAC 0.4.4 (CAC(ratings, categories=range(Q), digits=15): fleiss(), gwet(), krippendorff()) on these
# data. irrCAC pins scipy==1.12 and pandas<3, which cannot live next to numpy 2.4, so it was run once in a
# separate virtualenv and its figures are kept here; `gwet_reference` below re-derives them independently.
IRRCAC = {
    (40, 200, 4, 5, 0.4): (0.299505106918306, 0.303289918792377, 0.442028985507247, 0.306254978466025),
    (41, 60, 3, 3, 0.3): (0.162705284389356, 0.163545036156434, 0.442176870748299, 0.18610594795539),
    (42, 150, 5, 8, 0.5): (0.38560579870034, 0.390403458881384, 0.466081871345029, 0.39802571815007),
}


def gwet_reference(codes, Q):
    """Gwet (2014), eqs. 2.8-2.10 and 5.2: a loop over units, as printed."""
    units = [[c for c in row if c >= 0] for row in codes.tolist()]
    rated = [u for u in units if u]
    pairable = [u for u in rated if len(u) >= 2]
    pa = sum(sum(u.count(k) * (u.count(k) - 1) for k in range(Q)) / (len(u) * (len(u) - 1)) for u in pairable)
    pa /= len(pairable)
    pi = [sum(u.count(k) / len(u) for u in rated) / len(rated) for k in range(Q)]
    pe_f = sum(x * x for x in pi)
    pe_g = sum(x * (1 - x) for x in pi) / (Q - 1)
    return (pa - pe_f) / (1 - pe_f), (pa - pe_g) / (1 - pe_g), pa


@pytest.mark.parametrize("key", list(IRRCAC))
def test_it_matches_irrcac_for_fleiss_kappa_and_ac1_with_missing_codings(key):
    codes = gen_codes(*key)
    Q = key[3]
    res = stats.agreement(codes, Q, B=20, seed=0)
    fleiss, ac1, pa, alpha = IRRCAC[key]
    assert abs(res.fleiss_kappa.value - fleiss) < 1e-6 and abs(res.gwet_ac1.value - ac1) < 1e-6
    assert abs(res.percent.value - pa) < 1e-6 and abs(res.krippendorff_alpha.value - alpha) < 1e-6
    ref = gwet_reference(codes, Q)
    assert (res.fleiss_kappa.value, res.gwet_ac1.value, res.percent.value) == pytest.approx(ref, abs=1e-12)
    assert res.n_rated == int(((codes >= 0).sum(axis=1) >= 1).sum()) and res.chance_categories == Q


def test_it_spreads_ac1_chance_over_the_codebook_categories():
    a = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    b = [0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
    codes = np.array([a, b]).T
    two = stats.agreement(codes, 2, B=20, seed=1)
    many = stats.agreement(codes, 2, B=20, seed=1, chance_categories=67)
    # pi = (0.5, 0.5): p_e = 0.5 over 1 category step, 0.5 / 66 over 66.
    assert two.gwet_ac1.value == pytest.approx(0.6)
    assert many.gwet_ac1.value == pytest.approx((0.8 - 0.5 / 66) / (1 - 0.5 / 66))
    assert many.chance_categories == 67 and many.fleiss_kappa == two.fleiss_kappa


def test_it_reports_the_share_of_undefined_replicates_and_why():
    # 20 episodes, three coders, one minority rating: a resample without that episode has one category only.
    codes = np.zeros((20, 3), dtype=int)
    codes[0, 0] = 1
    res = stats.agreement(codes, 2, B=1000, seed=0)
    W = np.vstack(list(interrater._weight_chunks(20, 1000, 0, stream=7)))
    undefined = float(np.mean(W[:, 0] == 0))
    assert 0.3 < undefined < 0.4  # (19/20)^20 = 0.358
    for e in (res.fleiss_kappa, res.krippendorff_alpha):
        assert e.undefined_share == pytest.approx(undefined)
        assert e.warning == (
            f"{undefined:.0%} of bootstrap replicates were undefined (every rating in the resample fell in one "
            "category) and are left out; the interval describes the resamples where it is defined"
        )
        assert e.method == "percentile" and e.low < e.value
    assert res.percent.undefined_share == 0 and res.percent.warning == ""
    assert res.pairs[0].kappa.undefined_share > 0.05 and "same category" in res.pairs[0].kappa.warning


def test_it_warns_only_above_five_percent_undefined():
    values = np.r_[0.5, np.linspace(0, 1, 95), np.full(5, np.nan)]
    assert interrater._estimate(values, 0.95, "u", "r").warning == ""
    assert interrater._estimate(values, 0.95, "u", "r").undefined_share == pytest.approx(0.05)
    values = np.r_[0.5, np.linspace(0, 1, 94), np.full(6, np.nan)]
    assert interrater._estimate(values, 0.95, "u", "r").warning.startswith(
        "6% of bootstrap replicates were undefined (r)"
    )
    few = interrater._estimate(np.r_[0.5, 0.4, np.full(9, np.nan)], 0.95, "u", "r")
    assert few.value == 0.5 and few.low is None and few.reason == "too few defined replicates for an interval"
    assert few.undefined_share == pytest.approx(0.9)


def test_it_takes_agreement_intervals_at_the_stated_quantiles():
    codes = gen_codes(3, 80, 2, 4, 0.0)
    for level in (0.95, 0.5):
        res = stats.agreement(codes, 4, B=600, seed=2, level=level)
        W = np.vstack(list(interrater._weight_chunks(80, 600, 2, stream=7)))
        agree = (codes[:, 0] == codes[:, 1]).astype(float)
        reps = (W @ agree) / W.sum(axis=1)
        lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
        assert res.percent.low == lo and res.percent.high == hi and res.percent.method == "percentile"
        assert res.pairs[0].percent.low == lo and res.pairs[0].percent.high == hi


def test_it_gives_a_one_sided_lower_bound_at_perfect_agreement():
    # One pair over 67 episodes, every label agreed (the MAST case that printed 1.000 [1.000, 1.000]).
    a = np.r_[np.zeros(60, int), np.ones(7, int)]
    res = stats.agreement(np.c_[a, a], 2, B=500, seed=0)
    po_low = 0.05 ** (1 / 67)  # Clopper-Pearson: 1 - upper bound on the disagreeing share (0 of 67)
    assert stats.one_sided_disagreement(0, 67) == pytest.approx(1 - po_low, rel=1e-12)
    pe = (60 / 67) ** 2 + (7 / 67) ** 2
    kappa = res.pairs[0].kappa
    assert kappa.value == 1 and kappa.high == 1 and kappa.one_sided
    assert kappa.method == "clopper_pearson_one_sided"
    assert kappa.low == pytest.approx((po_low - pe) / (1 - pe), rel=1e-12)
    assert res.pairs[0].percent.low == pytest.approx(po_low, rel=1e-12)
    assert res.percent.low == pytest.approx(po_low, rel=1e-12)
    assert res.fleiss_kappa.low == pytest.approx((po_low - pe) / (1 - pe), rel=1e-12)
    pe_g = 2 * (60 / 67) * (7 / 67)
    assert res.gwet_ac1.low == pytest.approx((po_low - pe_g) / (1 - pe_g), rel=1e-12)
    n, de = 134, 134**2 - (120**2 + 14**2)
    assert res.krippendorff_alpha.low == pytest.approx(1 - (n - 1) * n * (1 - po_low) / de, rel=1e-12)
    assert all(e.one_sided and e.low < 1 for e in (res.percent, res.fleiss_kappa, res.gwet_ac1,
                                                   res.krippendorff_alpha))  # fmt: skip
    assert res.disagreeing == 0 and res.pairs[0].disagreeing == 0


def test_it_gives_a_one_sided_bound_at_near_perfect_agreement_and_percentile_otherwise():
    a = np.r_[np.zeros(60, int), np.ones(7, int)]
    b = a.copy()
    b[0] = 1
    res = stats.agreement(np.c_[a, b], 2, B=500, seed=0)
    k = res.pairs[0].kappa
    assert k.one_sided and k.low < k.value < 1 and res.pairs[0].disagreeing == 1
    po_low = 1 - stats.one_sided_disagreement(1, 67)
    pe = (60 / 67) * (59 / 67) + (7 / 67) * (8 / 67)
    assert k.low == pytest.approx((po_low - pe) / (1 - pe), rel=1e-12)
    moderate = stats.agreement(gen_codes(5, 100, 2, 3, 0.0), 3, B=300, seed=0)
    assert not moderate.fleiss_kappa.one_sided and moderate.fleiss_kappa.high < 1
    assert not moderate.pairs[0].kappa.one_sided


def test_it_carries_the_mean_disagreement_of_multi_coder_units_into_the_bound():
    codes = np.zeros((40, 3), dtype=int)
    codes[:20, :] = 1
    codes[0, 2] = 0  # one unit with 1 of 3 pairs agreeing: disagreement 2/3
    res = stats.agreement(codes, 2, B=400, seed=0)
    assert res.disagreeing == 1 and res.percent.one_sided
    assert res.percent.low == pytest.approx(1 - stats.one_sided_disagreement(1, 40) * 2 / 3, rel=1e-12)


def test_it_computes_specific_agreement_for_three_coders_by_hand():
    codes = np.array([[0, 0, 1], [1, 1, 1], [0, 2, -1], [2, 2, 2], [0, -1, -1]])
    res = stats.agreement(codes, 3, B=50, seed=0)
    # Unit 1: category 0 has 2 agreeing pair-ends of its 2 uses (each 0 pairs with the other 0 once of 2),
    # specific agreement per category = sum_u n_uk (n_uk - 1) / (m_u - 1) over sum_u n_uk.
    num = [2 * 1 / 2 + 0, 0 + 3 * 2 / 2, 0 + 3 * 2 / 2]
    uses = [2 + 1, 1 + 3, 1 + 3]
    assert res.specific.tolist() == pytest.approx([num[0] / uses[0], (0 + 3) / 4, (0 + 3) / 4])
    assert res.specific_n.tolist() == uses and res.n_units == 4 and res.n_rated == 5
    assert res.n_ratings == 11


def test_it_checks_the_cap_on_the_second_kind_too():
    # Kind b holds one 12-episode cluster in cell 0 and six singles in cell 1; kind a is flat.
    a = design([0, 1] * 10, [f"a{i}" for i in range(20)], K=2)
    b = design([0] * 12 + [1] * 6, ["big"] * 12 + [f"b{i}" for i in range(6)], K=2)
    cap = {c.name: c for c in stats.sensitivity(a, b, 0, B=200, seed=1, cap=2, subsamples=4)}["cluster_cap"]
    # Capped, b keeps 2 of 8 in cell 0 and a keeps 10 of 20: the contrast becomes 0.5 - 0.25.
    assert cap.estimate == pytest.approx(0.5 - 2 / 8)
    assert cap.detail == {"cap": 2, "subsamples": 4, "min": pytest.approx(0.25), "max": pytest.approx(0.25)}


# --- exact wording of reasons and checks (what pages and the API show) ----------


def test_it_says_exactly_why_there_is_no_value():
    assert stats.design_enough(design([], [], K=2)) == (False, "no episodes")
    assert stats.design_enough(design([0, 1], ["a", "a"], K=2)) == (
        False, "fewer than 2 clusters: the bootstrap cannot resample"
    )  # fmt: skip
    assert stats.design_enough(design([0, 1], ["a", "b"], K=2)) == (True, "")
    assert stats.wilson(0, 0).reason == "no episodes"
    empty = stats.agreement(np.array([[0, -1], [1, -1], [0, 0]]), 2, B=10)
    why = "fewer than 2 episodes coded by two or more coders"
    assert empty.reason == why and empty.n_units == 1 and empty.n_ratings == 2 and empty.n_rated == 3
    assert all(e.reason == why and e.value is None for e in (empty.percent, empty.fleiss_kappa,
                                                              empty.krippendorff_alpha, empty.gwet_ac1))  # fmt: skip
    assert empty.specific.tolist() == [-1.0, -1.0] and empty.specific_n.tolist() == [0, 0]
    same = stats.agreement(np.zeros((4, 2), dtype=int), 2, B=10)
    assert same.fleiss_kappa.reason == "all ratings in one category: kappa is undefined"
    assert same.krippendorff_alpha.reason == "all ratings in one category: alpha is undefined"
    assert same.pairs[0].kappa.reason == "both coders used one and the same category: kappa is undefined"
    assert same.gwet_ac1.value == 1.0  # chance is spread over both codebook categories
    single = stats.agreement(np.zeros((4, 2), dtype=int), 1, B=10)
    assert single.gwet_ac1.value is None and single.gwet_ac1.reason == "undefined for a single category"
    assert single.percent.value == 1.0 and single.percent.one_sided
    codes = np.zeros((20, 2), dtype=int)
    codes[0, 0] = 1
    res = stats.agreement(codes, 2, B=400, seed=0)
    assert res.pairs[0].kappa.warning.startswith(
        f"{res.pairs[0].kappa.undefined_share:.0%} of bootstrap replicates were undefined (both coders used one "
        "and the same category in the resample) and are left out"
    )
    no_pairs = np.array([[0, 1, -1], [1, 1, -1]] + [[0, -1, -1]] * 30)
    drawn = stats.agreement(no_pairs, 2, B=400, seed=0)
    assert drawn.percent.undefined_share > 0.05  # (30/32)^32: both coded-twice episodes missed
    assert "(the resample drew no episode coded by two or more coders)" in drawn.percent.warning
    assert "(the resample drew no episode coded by two or more coders)" in drawn.gwet_ac1.warning


def test_it_describes_each_sensitivity_check_exactly():
    a, b = dominated()
    checks = stats.sensitivity(a, b, 0, B=200, seed=1, cap=2, subsamples=3)
    assert [c.description for c in checks] == [
        "Leave one cluster out: the range of the contrast, and the cluster that moves it most",
        "At most 2 episodes per cluster, averaged over random subsamples",
        "Without the largest cluster of each kind (clusters of one episode are kept)",
        "Ordinary record-level bootstrap (ignores clustering)",
    ]
    loo, _cap, drop, rec = checks
    assert loo.detail["n_clusters"] == 12 and loo.detail["most_influential"]["side"] == "a"
    assert loo.detail["most_influential"]["shift"] == pytest.approx(-10 / 15)
    iv = stats.bootstrap_diff_cell(stats.design_without(a, [a.names.index("big")]), b, 0, B=200, seed=1, stream=1)
    assert (loo.low, loo.high) == (iv.low, iv.high)  # the interval without "big", taken from kind a only
    assert drop.detail == {"a": "big", "a_size": 10, "b": None, "b_size": 0}
    # Without "big", neither kind has anything in cell 0: every replicate difference is 0.
    assert (drop.low, drop.high, drop.excludes_zero, drop.enough) == (0.0, 0.0, False, True)
    assert set(rec.detail) == {"cluster_width", "record_width", "widening"}
    assert rec.detail["record_width"] < rec.detail["cluster_width"]
    singles = design([0, 1, 0, 1], ["s1", "s2", "s3", "s4"], K=2)
    flat = {c.name: c for c in stats.sensitivity(singles, singles, 0, B=100, seed=1)}["drop_largest_cluster"]
    assert flat.enough is False and flat.reason == "no cluster holds more than one episode"
    assert flat.description == "Without the largest cluster of each kind (clusters of one episode are kept)"
    assert flat.detail == {"a": None, "a_size": 0, "b": None, "b_size": 0} and flat.estimate is None
    two = design([0, 0, 1], ["x", "x", "y"], K=2)
    short = {c.name: c for c in stats.sensitivity(two, singles, 0, B=100, seed=1)}["drop_largest_cluster"]
    assert short.estimate == pytest.approx(0 - 0.5) and short.low is None and short.excludes_zero is None
    assert short.keeps_sign is False


# --- boundaries the mutation run showed untested --------------------------------


def test_it_counts_enough_exactly_from_one_episode_and_keeps_every_code():
    one = stats.cell_matrix(np.array([1]), np.array([0]), 2, 2)
    assert one.enough is True and one.reason == "" and one.n == 1
    none = stats.cell_matrix(np.array([-1]), np.array([0]), 2, 2)
    assert none.enough is False and none.reason == "no episodes"
    assert stats.distribution(np.array([0]), 3).counts.tolist() == [1, 0, 0]  # unused codes keep their zero


def test_it_fills_every_field_of_a_wilson_interval():
    w = stats.wilson(8, 10)
    assert (w.k, w.n, w.value, w.enough, w.reason) == (8, 10, 0.8, True, "")
    one = stats.wilson(1, 1)
    assert one.enough is True and one.high == 1.0 and 0 < one.low < 1
    none = stats.wilson(0, 0)
    assert (none.k, none.n, none.enough, none.low, none.high) == (0, 0, False, None, None)
    with pytest.raises(ValueError, match=r"^k must be between 0 and n$"):
        stats.wilson(3, 2)
    with pytest.raises(ValueError, match=r"^k must be between 0 and n$"):
        stats.wilson(-1, 2)


def test_it_accepts_the_smallest_beta_inputs_and_names_every_method_on_refusal():
    lo, hi = stats.analytic_limits(np.array([0.5]), np.array([2.0]), "beta_cr2_bm", n=2, df=1)
    assert 0 < lo[0] < 0.5 < hi[0] < 1
    with pytest.raises(ValueError, match=r"^the beta interval needs"):
        stats.analytic_limits(np.array([0.5]), np.array([10.0]), "beta_cr2_bm", n=10)  # no df given
    with pytest.raises(ValueError, match=r"^method must be one of beta_cr2_bm, svyciprop_beta, jeffreys_deff, "
                       r"wilson_deff, percentile, bca$"):  # fmt: skip
        stats.analytic_limits(np.array([0.1]), np.array([10.0]), "wald")


def test_it_gives_limits_for_a_single_record_and_for_a_nearly_full_cell_like_a_reference():
    from scipy import stats as st

    a = 0.05
    # x* = p n* below 1 (one record), and n* - x* below 1 (all but one record): the Beta parameters' floor must
    # not bite, and a positive count must get a positive lower limit.
    for p, n in ((1 / 40, 12.5), (39 / 40, 12.5), (0.3, 0.8)):
        x = p * n
        lo, hi = stats.analytic_limits(np.array([p]), np.array([n]), "jeffreys_deff")
        assert lo[0] == pytest.approx(st.beta.ppf(a / 2, x + 0.5, n - x + 0.5), abs=1e-12) and lo[0] > 0
        assert hi[0] == pytest.approx(st.beta.ppf(1 - a / 2, x + 0.5, n - x + 0.5), abs=1e-12) and hi[0] < 1
        k = (st.t.ppf(1 - a / 2, 39) / st.t.ppf(1 - a / 2, 5)) ** 2
        lo, hi = stats.analytic_limits(np.array([p]), np.array([n]), "beta_cr2_bm", n=40, df=5)
        nk, xk = n * k, p * n * k
        assert lo[0] == pytest.approx(st.beta.ppf(a / 2, xk, nk - xk + 1), abs=1e-12) and lo[0] > 0
        assert hi[0] == pytest.approx(st.beta.ppf(1 - a / 2, xk + 1, nk - xk), abs=1e-12) and hi[0] < 1
        # The upper limit on its own degrees of freedom, the lower one unmoved.
        k2 = (st.t.ppf(1 - a / 2, 39) / st.t.ppf(1 - a / 2, 2)) ** 2
        lo2, hi2 = stats.analytic_limits(np.array([p]), np.array([n]), "beta_cr2_bm", n=40, df=5, df_upper=2.0)
        nk, xk = n * k2, p * n * k2
        assert lo2[0] == lo[0] and hi2[0] == pytest.approx(st.beta.ppf(1 - a / 2, xk + 1, nk - xk), abs=1e-12)
    lo, hi = stats.analytic_limits(np.array([1.0, 0.0]), np.array([10.0, 10.0]), "jeffreys_deff")
    assert hi[0] == 1.0 and lo[1] == 0.0 and lo[0] < 1 and hi[1] > 0


def test_it_computes_design_effects_without_numerical_warnings(recwarn):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one_cell = stats.effective_sizes(design([1, 1, 1], ["a", "b", "b"], K=3))  # every share is 0 or 1
        assert one_cell.deff.tolist() == [1.0, 1.0, 1.0] and one_cell.df.tolist() == [1.0] * 3
        iv = stats.cell_intervals(design([1, 1, 1], ["a", "b", "b"], K=3), None)
        assert iv.low[1] > 0 and iv.high[1] == 1 and iv.high[0] > 0


def reference_weights(U, B, seed, stream=7):
    """Bootstrap weights over units as the module documents them: block i draws from SeedSequence(seed, (stream, i))."""
    rows = []
    for i in range(-(-B // stats.BLOCK)):
        b = min(stats.BLOCK, B - i * stats.BLOCK)
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream, i)))
        idx = rng.integers(0, U, size=(b, U))
        rows += [np.bincount(r, minlength=U) for r in idx]
    return np.array(rows, dtype=float)


@pytest.mark.parametrize("max_cells", [1 << 22, 3 * stats.BLOCK * 7])  # one chunk, and chunks of three blocks
def test_it_draws_agreement_weights_block_by_block_from_documented_seeds(max_cells):
    B, U = 5 * stats.BLOCK + 37, 7  # a ragged last block
    chunks = list(interrater._weight_chunks(U, B, 11, 7, max_cells=max_cells))
    W = np.vstack(chunks)
    assert W.shape == (B, U) and W.dtype == np.float64
    assert np.array_equal(W, reference_weights(U, B, 11))
    assert (W.sum(axis=1) == U).all()
    assert len(chunks) == (1 if max_cells == 1 << 22 else 2)


def test_it_computes_agreement_without_numerical_warnings():
    import warnings

    codes = np.zeros((20, 3), dtype=int)
    codes[0, 0] = 1
    no_pairs = np.array([[0, 1, -1], [1, 1, -1]] + [[0, -1, -1]] * 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for c in (codes, no_pairs, np.zeros((5, 2), dtype=int)):
            stats.agreement(c, 2, B=300, seed=0)


def test_it_returns_a_finite_not_enough_difference_with_every_field_and_both_reasons():
    import warnings

    empty = design([], [], K=3)
    lonely = design([0, 1], ["a", "a"], K=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = stats.diff_intervals(empty, lonely, np.zeros((10, 3)), np.zeros((10, 3)), names=("x", "y"))
    assert both.reason == "x: no episodes; y: fewer than 2 clusters: the bootstrap cannot resample"
    assert both.enough is False and both.method == "percentile"
    assert both.estimate.tolist() == [-0.5, -0.5, 0.0]
    assert both.low.tolist() == [0.0, 0.0, 0.0] and both.high.tolist() == [0.0, 0.0, 0.0]
    assert both.few_clusters.tolist() == [True, True, True]
    assert not both.low.flags.writeable and not both.high.flags.writeable and not both.estimate.flags.writeable
    assert stats.diff_intervals(lonely, empty, np.zeros((5, 3)), np.zeros((5, 3)), bca=True).method == "bca"


def test_it_flags_a_difference_only_when_a_side_has_fewer_than_five_clusters_with_records():
    five = design([0] * 5 + [1] * 5, [f"c{i}" for i in range(10)], K=2)
    four = design([0] * 4 + [1] * 6, [f"c{i}" for i in range(10)], K=2)
    reps = stats.replicate_blocks([five, four], B=20, seed=1)
    assert stats.diff_intervals(five, five, reps[0], reps[0]).few_clusters.tolist() == [False, False]
    assert stats.diff_intervals(five, four, *reps).few_clusters.tolist() == [True, False]
    assert stats.diff_intervals(four, five, reps[1], reps[0]).few_clusters.tolist() == [True, False]


def test_it_bounds_the_disagreeing_share_like_clopper_pearson():
    from scipy import stats as st

    assert stats.one_sided_disagreement(1, 67) == pytest.approx(st.beta.ppf(0.95, 2, 66), rel=1e-12)
    assert stats.one_sided_disagreement(3, 40, level=0.9) == pytest.approx(st.beta.ppf(0.9, 4, 37), rel=1e-12)
    assert stats.one_sided_disagreement(0, 1) == pytest.approx(0.95)
    assert stats.one_sided_disagreement(2, 2) == 1.0


def test_it_fills_every_field_of_agreement_estimates():
    a = np.r_[np.zeros(60, int), np.ones(7, int)]
    res = stats.agreement(np.c_[a, a], 2, B=200, seed=0, level=0.9)
    assert res.percent.low == pytest.approx(0.1 ** (1 / 67), rel=1e-12)  # the bound at the asked level
    assert res.percent.reason == "" and res.percent.warning == "" and res.percent.undefined_share == 0.0
    moderate = stats.agreement(gen_codes(5, 60, 2, 3, 0.0), 3, B=200, seed=0)
    assert moderate.fleiss_kappa.reason == "" and moderate.fleiss_kappa.method == "percentile"
    default, explicit = (
        stats.agreement(gen_codes(5, 60, 2, 3, 0.0), 3),
        stats.agreement(gen_codes(5, 60, 2, 3, 0.0), 3, B=1000, seed=0),
    )
    assert default.fleiss_kappa == explicit.fleiss_kappa and default.pairs[0].kappa == explicit.pairs[0].kappa
    few = interrater._estimate(np.r_[0.5, 0.4, np.full(9, np.nan)], 0.95, "u", "r")
    assert few.warning.startswith("90% of bootstrap replicates were undefined (r)")
    empty = stats.agreement(np.array([[0, -1], [1, -1], [0, 0]]), 3, B=10, chance_categories=5)
    assert empty.enough is False and empty.chance_categories == 5 and empty.specific_n.dtype == np.int64
    full = stats.agreement(np.array([[0, 1], [1, 1], [0, 0]]), 3, B=10, chance_categories=5)
    assert full.enough is True and full.reason == "" and full.chance_categories == 5


def test_it_fills_every_field_of_an_enough_difference():
    a, b = paper_like(1), paper_like(2)
    ra, rb = stats.replicate_blocks([a, b], B=100, seed=3)
    diff = stats.diff_intervals(a, b, ra, rb)
    assert diff.enough is True and diff.reason == "" and diff.method == "percentile"
    assert np.array_equal(diff.estimate, a.totals / a.n - b.totals / b.n) and not diff.estimate.flags.writeable


def test_it_fills_every_field_of_a_pair_and_its_bounds():
    a = np.r_[np.zeros(60, int), np.ones(7, int)]
    res = stats.agreement(np.c_[a, np.full(67, -1), a], 3, B=200, seed=0, level=0.9)
    pair = res.pairs[0]
    assert (pair.coder_a, pair.coder_b, pair.n, pair.disagreeing) == (0, 2, 67, 0)
    assert pair.percent.low == pytest.approx(0.1 ** (1 / 67), rel=1e-12) and pair.percent.reason == ""
    # Coders 0 and 1 share one episode: most resamples miss it.
    sparse = np.c_[a, np.r_[1, np.full(66, -1)], a]
    res = stats.agreement(sparse, 3, B=300, seed=0)
    p01 = next(p for p in res.pairs if (p.coder_a, p.coder_b) == (0, 1))
    assert p01.n == 1 and p01.percent.value == 0.0 and p01.percent.undefined_share > 0.3  # (66/67)^67
    assert "were undefined (no episode coded by both)" in p01.percent.warning


def test_it_marks_unused_categories_in_specific_agreement():
    codes = np.array([[0, 0], [0, 0], [0, 1], [3, 3]])
    res = stats.agreement(codes, 4, B=20, seed=0)
    # 0: 4 agreeing pair-ends of 5 uses; 1: used once, never agreed; 2: unused; 3: 2 of 2.
    assert res.specific.tolist() == [0.8, 0.0, -1.0, 1.0] and res.specific_n.tolist() == [5, 1, 0, 2]


def test_it_wires_every_sensitivity_check_to_its_own_stream_level_and_seed():
    a, b = paper_like(11, n_clusters=25), paper_like(12, n_clusters=20)
    k, B, seed, level, cap, subs = 1, 256, 5, 0.9, 2, 3
    checks = {c.name: c for c in stats.sensitivity(a, b, k, B=B, seed=seed, level=level, cap=cap, subsamples=subs)}
    pa, pb = a.totals[k] / a.n, b.totals[k] / b.n
    base = stats.bootstrap_diff_cell(a, b, k, B=B, seed=seed, level=level)
    # Leave one cluster out, recomputed cluster by cluster.
    loo = [((a.totals[k] - a.counts[g, k]) / (a.n - a.sizes[g]) - pb, "a", a.names[g]) for g in range(a.n_clusters)]
    loo += [(pa - (b.totals[k] - b.counts[g, k]) / (b.n - b.sizes[g]), "b", b.names[g]) for g in range(b.n_clusters)]
    worst = max(loo, key=lambda t: abs(t[0] - base.estimate))
    c = checks["leave_one_cluster_out"]
    assert c.estimate == pytest.approx(worst[0]) and c.detail["most_influential"]["cluster"] == worst[2]
    assert c.detail["most_influential"]["side"] == worst[1] and c.detail["n_clusters"] == len(loo)
    assert (c.detail["min"], c.detail["max"]) == (pytest.approx(min(t[0] for t in loo)),
                                                  pytest.approx(max(t[0] for t in loo)))  # fmt: skip
    drop_a = stats.design_without(a, [a.names.index(worst[2])]) if worst[1] == "a" else a
    drop_b = stats.design_without(b, [b.names.index(worst[2])]) if worst[1] == "b" else b
    iv = stats.bootstrap_diff_cell(drop_a, drop_b, k, B=B, seed=seed, level=level, stream=1)
    assert (c.low, c.high) == (iv.low, iv.high)
    assert c.keeps_sign == all(np.sign(t[0]) == np.sign(base.estimate) for t in loo)
    # The cap: the same subsamples, each with its own replicate stream, pooled.
    rng = bootstrap._block_rng(seed, 0, stream=2)
    ests, reps = [], []
    for s in range(subs):
        ca, cb = sensitivity_checks._capped(a, cap, rng), sensitivity_checks._capped(b, cap, rng)
        ests.append(ca.totals[k] / ca.n - cb.totals[k] / cb.n)
        ra, rb = stats.replicate_blocks([ca, cb], B=max(stats.BLOCK, -(-B // subs)), seed=seed, stream=100 + s)
        reps.append(stats.replicate_proportions(ra)[:, k] - stats.replicate_proportions(rb)[:, k])
    lo, hi = np.quantile(np.concatenate(reps), [0.05, 0.95])
    c = checks["cluster_cap"]
    assert c.estimate == pytest.approx(np.mean(ests)) and (c.low, c.high) == (pytest.approx(lo), pytest.approx(hi))
    assert c.detail == {"cap": 2, "subsamples": 3, "min": pytest.approx(min(ests)), "max": pytest.approx(max(ests))}
    # Dropping the largest cluster of each kind, and the record-level bootstrap, on streams 3 and 4.
    la, lb = int(np.argmax(a.sizes)), int(np.argmax(b.sizes))
    da, db = stats.design_without(a, [la]), stats.design_without(b, [lb])
    iv = stats.bootstrap_diff_cell(da, db, k, B=B, seed=seed, level=level, stream=3)
    c = checks["drop_largest_cluster"]
    assert (c.estimate, c.low, c.high) == (pytest.approx(iv.estimate), iv.low, iv.high)
    assert c.excludes_zero == iv.excludes_zero and c.keeps_sign == (np.sign(iv.estimate) == np.sign(base.estimate))
    iv = stats.bootstrap_diff_cell(stats.record_design(a), stats.record_design(b), k, B=B, seed=seed, level=level,
                                   stream=4)  # fmt: skip
    c = checks["record_bootstrap"]
    assert (c.estimate, c.low, c.high, c.excludes_zero) == (iv.estimate, iv.low, iv.high, iv.excludes_zero)
    assert c.detail["widening"] == pytest.approx((base.high - base.low) / (iv.high - iv.low))
    defaults = {c.name: c for c in stats.sensitivity(a, b, k, B=B, seed=seed)}
    assert defaults["cluster_cap"].detail["cap"] == 5 and defaults["cluster_cap"].detail["subsamples"] == 20


def skewed_design(G: int, seed: int, K: int = 42) -> stats.ClusterDesign:
    """G repositories of Zipf-like sizes (most hold one or two episodes, a few hundreds), over the 7 x 6 cells
    of the codebook's stages and capabilities."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(2.2, G), 300)
    clusters = np.repeat(np.array([f"repo{i:06d}" for i in range(G)], dtype=object), sizes)
    return stats.cluster_design(rng.integers(0, K, clusters.size), clusters, K)


def test_it_runs_the_sensitivity_checks_in_time_linear_in_the_repositories():
    """4x the repositories may cost at most 6x the process time (issue 31: it was 25x, the whole count matrix
    re-summed once per cluster; this setting gave 10x before the fix, 2.4x after). The least of five runs is
    taken, so a busy machine cannot fail it. B and the subsamples are small: the draws are linear anyway, and
    a large B would hide a quadratic step behind them."""
    import time

    def cost(G: int) -> float:
        a, b = skewed_design(G, 1), skewed_design(G, 2)
        runs = []
        for _ in range(5):
            t = time.process_time()
            stats.sensitivity(a, b, 3, B=128, seed=0, subsamples=2)
            runs.append(time.process_time() - t)
        return min(runs)

    small, large = cost(2_500), cost(10_000)
    assert large <= 6 * small, f"{large:.2f} s at 10,000 repositories per kind against {small:.2f} s at 2,500"


def test_it_sums_a_design_once_and_keeps_its_margins_read_only():
    d = skewed_design(50, 3, K=4)
    assert d.sizes is d.sizes and d.totals is d.totals and d.n == int(d.counts.sum())
    assert d.sizes.tolist() == d.counts.sum(axis=1).tolist() and d.totals.tolist() == d.counts.sum(axis=0).tolist()
    with pytest.raises(ValueError):
        d.sizes[0] = 0


def test_it_caps_clusters_like_rebuilding_the_design_from_the_kept_episodes():
    """The capped design is built without sorting names again; it must hold what cluster_design would make of the
    same kept episodes, a counts-only design with empty rows included (those clusters drop out)."""
    counts = np.random.default_rng(4).integers(0, 4, (30, 5))
    counts[[2, 11]] = 0
    for d in (skewed_design(200, 5, K=5), stats.counts_design(counts)):
        rng, ref_rng = np.random.default_rng(9), np.random.default_rng(9)
        capped = sensitivity_checks._capped(d, 2, rng)
        keys = ref_rng.random(d.n)
        order = np.lexsort((keys, d.episode_cluster))
        g = d.episode_cluster[order]
        rank = np.arange(d.n) - np.searchsorted(g, np.arange(d.n_clusters))[g]
        keep = order[rank < 2]
        names = np.asarray(d.names, dtype=object)[d.episode_cluster[keep]]
        ref = stats.cluster_design(d.cells[keep], names, d.n_cells)
        by_name = dict(zip(capped.names, capped.counts.tolist(), strict=True))
        assert by_name == dict(zip(ref.names, ref.counts.tolist(), strict=True))
        assert capped.sizes.max() <= 2 and capped.n_clusters == int((d.sizes > 0).sum())
        assert np.all(np.diff(capped.episode_cluster) >= 0)
        assert np.array_equal(np.bincount(capped.episode_cluster * d.n_cells + capped.cells,
                                          minlength=capped.counts.size), capped.counts.ravel())  # fmt: skip


def test_it_names_and_drops_the_most_influential_cluster_on_the_second_kinds_side():
    a, b = dominated()  # swapped below: the cluster that carries the contrast is on side b
    checks = {c.name: c for c in stats.sensitivity(b, a, 0, B=200, seed=1, cap=2, subsamples=3)}
    loo = checks["leave_one_cluster_out"]
    assert loo.detail["most_influential"] == {"side": "b", "cluster": "big", "shift": pytest.approx(10 / 15)}
    assert loo.estimate == pytest.approx(0.0) and loo.detail["n_clusters"] == 12
    iv = stats.bootstrap_diff_cell(b, stats.design_without(a, [a.names.index("big")]), 0, B=200, seed=1, stream=1)
    assert (loo.low, loo.high) == (iv.low, iv.high)
    drop = checks["drop_largest_cluster"]
    assert drop.detail == {"a": None, "a_size": 0, "b": "big", "b_size": 10}  # b's six singles stay
    # A largest cluster of two episodes is still dropped (only clusters of one are kept).
    pair = design([0, 0, 1], ["x", "x", "y"], K=2)
    drop = {c.name: c for c in stats.sensitivity(a, pair, 0, B=100, seed=1)}["drop_largest_cluster"]
    assert drop.detail == {"a": "big", "a_size": 10, "b": "x", "b_size": 2}
    # On side a, only kind a loses the cluster: kind b (here varied in cell 0) stays whole.
    mixed = design([0, 1, 1, 0, 1, 1], [f"p{i}" for i in range(6)], K=2)
    loo = stats.sensitivity(a, mixed, 0, B=200, seed=1)[0]
    assert loo.detail["most_influential"]["side"] == "a" and loo.detail["most_influential"]["cluster"] == "big"
    iv = stats.bootstrap_diff_cell(stats.design_without(a, [a.names.index("big")]), mixed, 0, B=200, seed=1, stream=1)
    assert (loo.low, loo.high) == (iv.low, iv.high)


def test_it_leaves_out_a_cluster_that_holds_all_but_one_or_all_episodes_of_a_kind():
    nine = design([0] * 9 + [1], ["x"] * 9 + ["y"], K=2)
    # Without x one episode is left (cell 1), without y nine (cell 0).
    assert sensitivity_checks._loo_cell(nine, 1).tolist() == [1.0, 0.0]
    assert sensitivity_checks._loo_cell(nine, 0).tolist() == [0.0, 1.0]
    # A cluster that holds every episode leaves nothing: 0, never a division by zero.
    whole = stats.counts_design(np.array([[3, 1], [0, 0]]))
    with np.errstate(all="raise"):
        assert sensitivity_checks._loo_cell(whole, 0).tolist() == [0.0, 0.75]
    b = design([0, 1, 1, 0, 1], ["p", "q", "q", "r", "s"], K=2)
    loo = stats.sensitivity(nine, b, 0, B=100, seed=1)[0]
    pb = 2 / 5
    expected = [0.0 - pb, 1.0 - pb] + [0.9 - (2 - c) / (5 - n) for c, n in ((1, 1), (0, 2), (1, 1), (0, 1))]
    assert loo.detail["n_clusters"] == 6
    assert (loo.detail["min"], loo.detail["max"]) == (pytest.approx(min(expected)), pytest.approx(max(expected)))
    mirrored = stats.sensitivity(b, nine, 0, B=100, seed=1)[0]
    assert mirrored.detail["n_clusters"] == 6
    assert (mirrored.detail["min"], mirrored.detail["max"]) == (pytest.approx(-max(expected)),
                                                                pytest.approx(-min(expected)))  # fmt: skip
    # Leaving out the cluster that holds all of kind a leaves no estimate: only the empty one counts.
    checks = {c.name: c for c in stats.sensitivity(whole, b, 0, B=100, seed=1, cap=1, subsamples=2)}
    assert checks["leave_one_cluster_out"].detail["n_clusters"] == 1 + 4
    # Capping drops the empty cluster, so the capped kind a has one cluster: estimates, but no interval.
    cap = checks["cluster_cap"]
    # Capped at one, kind a keeps one of its four episodes (cell 0 or 1), kind b one per cluster (2 of 4 in cell 0).
    assert {cap.detail["min"], cap.detail["max"]} <= {1.0 - 2 / 4, 0.0 - 2 / 4} and cap.detail["subsamples"] == 2
    assert (cap.low, cap.high, cap.excludes_zero) == (None, None, None) and cap.estimate is not None
    # Dropping "the largest cluster" would leave kind a empty: it is kept, and b's largest is dropped.
    drop = checks["drop_largest_cluster"]
    assert drop.detail == {"a": None, "a_size": 0, "b": "q", "b_size": 2}
    assert drop.estimate == pytest.approx(3 / 4 - 2 / 3)
    mirrored = {c.name: c for c in stats.sensitivity(b, whole, 0, B=100, seed=1, cap=1, subsamples=1)}
    assert mirrored["leave_one_cluster_out"].detail["n_clusters"] == 4 + 1
    assert mirrored["drop_largest_cluster"].detail == {"a": "q", "a_size": 2, "b": None, "b_size": 0}


def test_it_refuses_a_cap_or_subsample_count_below_one():
    a, b = dominated()
    for bad in ({"cap": 0}, {"subsamples": 0}, {"cap": -1}):
        with pytest.raises(ValueError, match=r"^cap and subsamples must be at least 1$"):
            stats.sensitivity(a, b, 0, B=100, seed=1, **bad)
    cap = {c.name: c for c in stats.sensitivity(a, b, 0, B=100, seed=1, cap=1, subsamples=1)}["cluster_cap"]
    assert cap.detail["cap"] == 1 and cap.detail["subsamples"] == 1


def test_it_splits_the_replicates_of_the_cap_check_over_its_subsamples():
    """B = 601 over 2 subsamples: ceil(601 / 2) = 301 replicates each (more than a block of 128), pooled."""
    a, b = paper_like(21, n_clusters=15), paper_like(22, n_clusters=12)
    cap = {c.name: c for c in stats.sensitivity(a, b, 1, B=601, seed=4, cap=3, subsamples=2)}["cluster_cap"]
    rng = bootstrap._block_rng(4, 0, stream=2)
    reps = []
    for s in range(2):
        ca, cb = sensitivity_checks._capped(a, 3, rng), sensitivity_checks._capped(b, 3, rng)
        ra, rb = stats.replicate_blocks([ca, cb], B=301, seed=4, stream=100 + s)
        assert ra.shape[0] == 301
        reps.append(stats.replicate_proportions(ra)[:, 1] - stats.replicate_proportions(rb)[:, 1])
    lo, hi = np.quantile(np.concatenate(reps), [0.025, 0.975])
    assert (cap.low, cap.high) == (pytest.approx(lo), pytest.approx(hi))


def test_it_reports_no_widening_when_the_record_interval_has_no_width():
    a = design([0, 0, 0, 0], ["x", "x", "y", "z"], K=2)
    b = design([0, 0, 0], ["p", "q", "q"], K=2)
    checks = {c.name: c for c in stats.sensitivity(a, b, 0, B=100, seed=1)}
    rec = checks["record_bootstrap"]
    assert (rec.low, rec.high) == (0.0, 0.0) and rec.detail["widening"] is None
    # An interval of [0, 0] does not exclude zero.
    cap = checks["cluster_cap"]
    assert (cap.low, cap.high, cap.excludes_zero) == (0.0, 0.0, False)


def test_it_reports_the_reason_and_names_when_sensitivity_lacks_data():
    a, _ = dominated()
    lonely = design([0, 1], ["x", "x"], K=2)
    for left, right in ((a, lonely), (lonely, a)):
        checks = stats.sensitivity(left, right, 0, B=100, seed=1)
        assert [c.name for c in checks] == ["leave_one_cluster_out", "cluster_cap", "drop_largest_cluster",
                                            "record_bootstrap"]  # fmt: skip
        assert all(c.enough is False and c.reason == "fewer than 2 clusters: the bootstrap cannot resample"
                   for c in checks)  # fmt: skip
        assert all(c.description and c.keeps_sign is None and c.detail == {} for c in checks)


def test_it_builds_record_and_reduced_designs_field_by_field():
    d = design([0, 1, 1, 2], ["r1", "r1", "r2", "r3"], K=3)
    rec = stats.record_design(d)
    assert rec.names == ("r1#0", "r1#1", "r2#2", "r3#3") and rec.counts.dtype == np.int64
    assert rec.counts.tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]]
    assert rec.cells.tolist() == [0, 1, 1, 2] and rec.episode_cluster.tolist() == [0, 1, 2, 3]
    less = stats.design_without(d, [0])
    assert less.names == ("r2", "r3") and less.counts.tolist() == [[0, 1, 0], [0, 0, 1]]
    assert less.cells.tolist() == [1, 2] and less.episode_cluster.tolist() == [0, 1]
    mid = stats.design_without(d, [1])
    assert mid.names == ("r1", "r3") and mid.episode_cluster.tolist() == [0, 0, 1] and mid.cells.tolist() == [0, 1, 2]


def test_it_fills_every_field_of_cell_intervals_with_and_without_enough_data():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = stats.cell_intervals(design([], [], K=3), None)
    assert empty.estimate.tolist() == [0.0, 0.0, 0.0] and empty.enough is False and empty.reason == "no episodes"
    assert empty.low.tolist() == [0.0] * 3 and empty.high.tolist() == [0.0] * 3 and empty.method == "beta_cr2_bm"
    assert not empty.high.flags.writeable and not empty.estimate.flags.writeable and empty.n_eff is None
    d = paper_like(2)
    ok = stats.cell_intervals(d, None, method="wilson_deff")
    assert ok.enough is True and ok.reason == "" and ok.method == "wilson_deff"
    assert np.array_equal(ok.n_eff, stats.effective_sizes(d).n_eff)
    assert (
        sensitivity_checks._sign(0.0) == 0
        and sensitivity_checks._sign(-2.0) == -1
        and sensitivity_checks._sign(0.5) == 1
    )


def test_it_finds_the_influential_cluster_when_its_name_holds_colons():
    a = design([0] * 10 + [1] * 5, ["doi:10.1/big:x"] * 10 + [f"s{i}" for i in range(5)], K=2)
    b = design([1] * 6, [f"p{i}" for i in range(6)], K=2)
    loo = stats.sensitivity(a, b, 0, B=128, seed=1, subsamples=2)[0]
    shift = pytest.approx(-10 / 15)
    assert loo.detail["most_influential"] == {"side": "a", "cluster": "doi:10.1/big:x", "shift": shift}


def test_it_takes_one_cells_difference_from_the_seeded_stream_of_both_kinds():
    a, b = paper_like(3), paper_like(4)
    for stream in (0, 2):
        ra, rb = stats.replicate_blocks([a, b], B=300, seed=5, stream=stream, threads=1)
        full = stats.diff_intervals(a, b, ra, rb)
        kw = {"stream": stream} if stream else {}  # stream 0 is the default
        iv = stats.bootstrap_diff_cell(a, b, 1, B=300, seed=5, **kw)
        assert (iv.estimate, iv.low, iv.high) == (full.estimate[1], full.low[1], full.high[1])
    assert stats.bootstrap_diff_cell(a, b, 1, B=300, seed=5, stream=2) != stats.bootstrap_diff_cell(
        a, b, 1, B=300, seed=5
    )


def test_it_counts_a_cell_held_by_one_record_as_one_cluster():
    d = design([0, 0, 0, 1, 0, 0], ["a", "a", "b", "b", "c", "c"], K=3)  # cell 1: one record; cell 2: none
    assert stats.effective_clusters(d).tolist() == [pytest.approx(25 / 9), 1.0, 0.0]


# Equivalent mutants: survivors of `make mutation` judged to change nothing observable (mutant: reason).
#   lib.stats.bootstrap.x__bca__mutmut_57: zeros_like(num, dtype=None) keeps num's float64
#   lib.stats.bootstrap.x__bca__mutmut_59: zeros_like(num) keeps num's float64
#   lib.stats.bootstrap.x__bca__mutmut_96: q comes from ndtr, in [0, 1], so q (B - 1) is never below 0
#   lib.stats.bootstrap.x__bca__mutmut_97: q <= 1, so q (B - 1) never exceeds B - 1
#   lib.stats.bootstrap.x__bca__mutmut_105: q <= 1, so the upper clip (B - 1 or B + 1) never bites
#   lib.stats.intervals.x_wilson__mutmut_86: the Wilson upper limit never exceeds 1 (exactly 1.0 at k = n)
#   lib.stats.designs.x_design_without__mutmut_26: the zipped sequences have equal length by construction
#   lib.stats.designs.x_design_without__mutmut_29: the zipped sequences have equal length by construction
#   lib.stats.designs.x_design_without__mutmut_30: the zipped sequences have equal length by construction
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_8: p meets float64 factors (n_lo, n_hi) before any use
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_10: p meets float64 factors (n_lo, n_hi) before any use
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_12: n_eff is multiplied by a float64 t-quantile ratio first
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_14: n_eff is multiplied by a float64 t-quantile ratio first
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_17: stdtrit casts df to float64; the >= 1 check reads the same
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_19: stdtrit casts df to float64; the >= 1 check reads the same
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_25: stdtrit casts df_upper to float64; the check reads the same
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_27: stdtrit casts df_upper to float64; the check reads the same
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_101: the upper half of the lower limit's _beta_limits is discarded
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_102: the upper half of the lower limit's _beta_limits is discarded
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_103: the upper half of the lower limit's _beta_limits is discarded
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_119: the lower half of the upper limit's _beta_limits is discarded
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_120: the lower half of the upper limit's _beta_limits is discarded
#   lib.stats.intervals.x_korn_graubard_limits__mutmut_121: the lower half of the upper limit's _beta_limits is discarded
#   lib.stats.intervals.x_analytic_limits__mutmut_2: n matters only to the beta methods, which refuse n below 2 either way
#   lib.stats.intervals.x_analytic_limits__mutmut_8: p meets float64 (n_eff, 0.5, z) in every branch before use
#   lib.stats.intervals.x_analytic_limits__mutmut_10: p meets float64 (n_eff, 0.5, z) in every branch before use
#   lib.stats.intervals.x_analytic_limits__mutmut_12: n_eff meets float64 (p, 0.5, z) in every branch before use
#   lib.stats.intervals.x_analytic_limits__mutmut_14: n_eff meets float64 (p, 0.5, z) in every branch before use
#   lib.stats.intervals.x_analytic_limits__mutmut_106: the Wilson upper limit never exceeds 1
#   lib.stats.intervals.x_bootstrap_diff_cell__mutmut_16: replicate_blocks draws fixed seeded blocks whatever the threads
#   lib.stats.intervals.x_bootstrap_diff_cell__mutmut_21: replicate_blocks draws fixed seeded blocks whatever the threads
#   lib.stats.intervals.x_bootstrap_diff_cell__mutmut_22: replicate_blocks draws fixed seeded blocks whatever the threads
#   lib.stats.intervals.x_effective_clusters__mutmut_2: integer counts give the same sums; the division is float64
#   lib.stats.intervals.x_bell_mccaffrey_df__mutmut_7: a size-0 cluster adds 0 to every sum, and the raw figure never
#     exceeds (clusters with records - 1), so the wider clip never bites
#   lib.stats.intervals.x_bell_mccaffrey_df__mutmut_11: with 2 clusters the clip to [1, G - 1] gives 1 as well
#   lib.stats.intervals.x_bell_mccaffrey_df__mutmut_12: with 2 clusters the clip to [1, G - 1] gives 1 as well
#   lib.stats.intervals.x_bell_mccaffrey_df__mutmut_42: (tr O)^2 / tr(O^2) of a non-zero PSD matrix is at least 1
#   lib.stats.intervals.x_svyciprop_sizes__mutmut_2: integer counts meet float64 p before any arithmetic
#   lib.stats.sensitivity_checks.x__capped__mutmut_56: the names are str: a str array's tolist() gives the same tuple
#   lib.stats.sensitivity_checks.x__capped__mutmut_58: the names are str: a str array's tolist() gives the same tuple
#   lib.stats.sensitivity_checks.x__cluster_cap__mutmut_47: replicate_blocks draws fixed seeded blocks whatever the threads
#   lib.stats.sensitivity_checks.x__cluster_cap__mutmut_52: replicate_blocks draws fixed seeded blocks whatever the threads
#   lib.stats.sensitivity_checks.x__cluster_cap__mutmut_55: replicate_blocks draws fixed seeded blocks whatever the threads
#   lib.stats.intervals.x_cell_icc__mutmut_3: integer sizes give the same sums; their ratio is a true division
#   lib.stats.intervals.x_cell_icc__mutmut_5: integer sizes give the same sums; their ratio is a true division
#   lib.stats.intervals.x_cell_icc__mutmut_17: zeros either way
#   lib.stats.intervals.x_cell_icc__mutmut_19: zeros either way
#   lib.stats.intervals.x_cell_icc__mutmut_29: deff - 1 is divided by the float cap - 1
#   lib.stats.intervals.x_cell_icc__mutmut_31: deff - 1 is divided by the float cap - 1
#   lib.stats.intervals.x_clustered_df__mutmut_4: integer sizes meet float64 (N, icc) before any power
#   lib.stats.intervals.x_clustered_df__mutmut_6: integer sizes meet float64 (N, icc) before any power
#   lib.stats.intervals.x_clustered_df__mutmut_13: icc meets the float64 sizes in V first
#   lib.stats.intervals.x_clustered_df__mutmut_15: icc meets the float64 sizes in V first
#   lib.stats.intervals.x_clustered_df__mutmut_18: with 2 clusters every clip is to [1, 1]
#   lib.stats.intervals.x_clustered_df__mutmut_19: with 2 clusters every clip is to [1, 1]
#   lib.stats.intervals.x_clustered_df__mutmut_94: a Satterthwaite ratio of a non-zero PSD matrix (O_r) is at least 1
#   lib.stats.intervals.x_clustered_df__mutmut_95: a Satterthwaite ratio never exceeds the rank of O_r, G - 1
#   lib.stats.intervals.x_clustered_df__mutmut_102: a Satterthwaite ratio never exceeds the rank of O_r, G - 1
#   lib.stats.intervals.x_clustered_df__mutmut_120: tr(O_r^2) and (tr O_r)^2 / df_r are at most (tr O_r)^2 <= (tr O)^2
#   lib.stats.intervals.x_clustered_df__mutmut_121: the ceiling is at most G - 1 and the smaller is taken
#   lib.stats.intervals.x_clustered_df__mutmut_128: the ceiling is at most G - 1 and the smaller is taken
#   lib.stats.intervals.x_clustered_df__mutmut_158: c between t_{G+1} and t_{G-1} inverts to a df above G - 1: clipped
#   lib.stats.intervals.x_clustered_df__mutmut_161: where c <= top the inverse of top is G - 1 again (to 1e-9)
#   lib.stats.intervals.x_clustered_df__mutmut_167: at c == top both branches give G - 1
#   lib.stats.intervals.x_clustered_df__mutmut_168: spread is already clipped to G - 1, and the smaller is taken
#   lib.stats.intervals.x_clustered_df__mutmut_172: c > top inverts to a df below G - 1
#   lib.stats.intervals.x_clustered_df__mutmut_185: c > top inverts to a df below G - 1
#   lib.stats.intervals.x_bell_mccaffrey_df__mutmut_43: (tr O)^2 / tr(O^2) never exceeds the rank of O, G - 1
#   lib.stats.intervals.x_bell_mccaffrey_df__mutmut_50: (tr O)^2 / tr(O^2) never exceeds the rank of O, G - 1
#   lib.stats.intervals.x_effective_sizes__mutmut_3: integer counts meet float64 p before any arithmetic
#   lib.stats.intervals.x_effective_sizes__mutmut_18: out=None leaves h = 1 (one cluster) unset, but its residuals are
#     all 0 and numpy's fresh buffer (a just-freed temporary) holds finite values there: not killable deterministically
#   lib.stats.intervals.x_effective_sizes__mutmut_52: out=None leaves raw unset where srs = 0 (a share of 0 or 1); the
#     fresh buffer is a just-freed temporary (srs' zeros), clipped to 1: not killable deterministically
#   lib.stats.interrater.x__confusion_cells__mutmut_15: np.unique returns its counts as int64 already
