"""Known-answer, coverage and cross-check tests of taxonomy.stats (no database)."""

from __future__ import annotations

import itertools
import random

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from taxonomy import stats


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


def test_it_gives_degenerate_intervals_when_every_cluster_is_identical():
    d = design([0, 1, 0, 1, 0, 1], ["a", "a", "b", "b", "c", "c"], K=2)
    reps = stats.replicate_blocks([d], B=500, seed=1)[0]
    boot = stats.cell_intervals(d, reps)
    assert boot.low.tolist() == [0.5, 0.5] and boot.high.tolist() == [0.5, 0.5]


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
    plan = stats._plan(d)
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
    jack = stats._jackknife_props(d)
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
