"""Intervals for cells and differences: analytic (Korn-Graubard, design-effect Jeffreys and Wilson) and bootstrap,
with the effective sizes they rest on; Wilson intervals for plain proportions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lib.stats.bootstrap import (
    BOOTSTRAP_METHODS,
    CELL_METHODS,
    DEFAULT_CELL_METHOD,
    MIN_CLUSTERS,
    CellBootstrap,
    DiffBootstrap,
    Interval,
    _bca,
    _jackknife_props,
    _percentile,
    design_enough,
    replicate_blocks,
    replicate_proportions,
)
from lib.stats.designs import ClusterDesign, _frozen, _level


def clusters_with_records(design: ClusterDesign) -> np.ndarray:
    """Per cell, how many clusters hold at least one of its episodes."""
    return (design.counts > 0).sum(axis=0)


@dataclass(frozen=True, eq=False)
class EffectiveSizes:
    """Per-cell design effects and effective sample sizes of one design, and the pooled degrees of freedom."""

    deff: np.ndarray
    n_eff: np.ndarray
    df: float


def effective_sizes(design: ClusterDesign) -> EffectiveSizes:
    """Per-cell design effect, effective sample size N / deff, and degrees of freedom for the t correction.

    The variance of p = Y / N under sampling of G clusters is estimated from
    the linearised residuals e_g = y_g - p m_g with the bias-reduced (CR2)
    correction of Bell and McCaffrey (2002): each residual is divided by
    sqrt(1 - h_g), h_g = m_g / N being the cluster's share of the records, so
    one dominant repository no longer hides its own weight. deff is that
    variance over the binomial p (1 - p) / N, floored at 1 (Korn and Graubard
    1998). A cell with no records, or with all of them, has no variance of its
    own and takes the kind's pooled design effect (summed variances over summed
    binomial variances), which keeps its interval from collapsing to a point.

    df is a Satterthwaite-type effective number of clusters, (sum e~^2)^2 /
    sum e~^4 with the sums over clusters and cells, clipped to [1, G - 1]: it
    nears G - 1 when clusters carry equal residual weight and falls towards
    the number of cells when one cluster carries it all. Pooling the cells
    keeps rare cells, whose residuals sit in a few clusters, from getting
    absurdly few degrees of freedom; bench/coverage_bench.py shows the
    resulting coverage (per-cell df over-cover rare cells at 100%, G - 1
    under-covers under skewed cluster sizes).
    """
    C = design.counts.astype(np.float64)
    G, N = C.shape[0], float(design.n)
    m = C.sum(axis=1)
    p = C.sum(axis=0) / N
    e2 = (C - np.outer(m, p)) ** 2 / (1 - m / N)[:, None]
    v = e2.sum(axis=0) / N**2
    srs = p * (1 - p) / N
    pooled = max(1.0, float(v.sum() / srs.sum())) if srs.sum() > 0 else 1.0
    own = np.divide(v, srs, out=np.full(p.shape, pooled), where=srs > 0)
    deff = np.maximum(own, 1.0)
    s4 = float((e2**2).sum())
    df = float(np.clip(e2.sum() ** 2 / s4, 1, G - 1)) if s4 > 0 else float(G - 1)
    return EffectiveSizes(_frozen(deff), _frozen(N / deff), df)


def _beta_limits(a_lo, b_lo, a_hi, b_hi, x, n, alpha):
    """Beta-quantile limits, 0 at x = 0 and 1 at x = n (where the lower / upper tail is empty)."""
    from scipy.special import betaincinv  # on first use: 25 MB a web process need not load

    lo = np.where(x > 0, betaincinv(np.maximum(a_lo, 1e-12), np.maximum(b_lo, 1e-12), alpha / 2), 0.0)
    hi = np.where(x < n, betaincinv(np.maximum(a_hi, 1e-12), np.maximum(b_hi, 1e-12), 1 - alpha / 2), 1.0)
    return lo, hi


def analytic_limits(
    p: np.ndarray, n_eff: np.ndarray, method: str, *, level: float = 0.95, n: int = 0, df: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Limits for shares p observed on effective sample sizes n_eff (x* = p n_eff "successes").

    korn_graubard: Clopper-Pearson on n_eff scaled by (t_{n-1} / t_df)^2, the
    degrees-of-freedom correction of Korn and Graubard (1998), Survey
    Methodology 24:193-201. jeffreys_deff: the Beta(x* + 1/2, n* - x* + 1/2)
    quantiles. wilson_deff: the Wilson score interval on n*.
    """
    from scipy.special import ndtri, stdtrit  # on first use: 25 MB a web process need not load

    alpha = 1 - _level(level)
    p, n_eff = np.asarray(p, dtype=np.float64), np.asarray(n_eff, dtype=np.float64)
    if method == "korn_graubard":
        if n < 2 or not df >= 1:
            raise ValueError("korn_graubard needs n of at least 2 and df of at least 1")
        n_eff = n_eff * (stdtrit(n - 1, 1 - alpha / 2) / stdtrit(df, 1 - alpha / 2)) ** 2
        x = p * n_eff
        return _beta_limits(x, n_eff - x + 1, x + 1, n_eff - x, x, n_eff, alpha)
    x = p * n_eff
    if method == "jeffreys_deff":
        return _beta_limits(x + 0.5, n_eff - x + 0.5, x + 0.5, n_eff - x + 0.5, x, n_eff, alpha)
    if method == "wilson_deff":
        z = ndtri(1 - alpha / 2)
        denom = 1 + z * z / n_eff
        centre = (p + z * z / (2 * n_eff)) / denom
        half = z * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff)) / denom
        return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)
    raise ValueError(f"method must be one of {', '.join(CELL_METHODS)}")


def cell_intervals(
    design: ClusterDesign, reps: np.ndarray | None, *, level: float = 0.95, bca: bool = False, method: str | None = None
) -> CellBootstrap:
    """Intervals for every cell proportion of one kind.

    `method` is one of CELL_METHODS (default DEFAULT_CELL_METHOD; `bca=True`
    is the old spelling of method="bca"). The bootstrap methods read the
    replicate counts `reps`; the analytic ones need only the design.
    """
    level = _level(level)
    method = method or ("bca" if bca else DEFAULT_CELL_METHOD)
    if method not in CELL_METHODS:
        raise ValueError(f"method must be one of {', '.join(CELL_METHODS)}")
    K = design.n_cells
    ok, reason = design_enough(design)
    est = design.totals / design.n if design.n else np.zeros(K)
    holding = clusters_with_records(design)
    if not ok:
        z = np.zeros(K)
        return CellBootstrap(_frozen(est), _frozen(z), _frozen(z.copy()), False, reason, method, _frozen(holding))
    eff = effective_sizes(design)
    if method in BOOTSTRAP_METHODS:
        if reps is None:
            raise ValueError(f"reps: the {method} method needs replicate counts")
        props = replicate_proportions(reps)
        if method == "bca":
            lo, hi = _bca(props, est, _jackknife_props(design), level)
        else:
            lo, hi = _percentile(props, level)
    else:
        lo, hi = analytic_limits(est, eff.n_eff, method, level=level, n=design.n, df=eff.df)
    return CellBootstrap(_frozen(est), _frozen(lo), _frozen(hi), True, "", method, _frozen(holding), eff.n_eff)


def diff_intervals(
    a: ClusterDesign,
    b: ClusterDesign,
    reps_a: np.ndarray,
    reps_b: np.ndarray,
    *,
    level: float = 0.95,
    bca: bool = False,
    names: tuple[str, str] = ("a", "b"),
) -> DiffBootstrap:
    """Intervals for p_a - p_b per cell; the two kinds are resampled independently."""
    level = _level(level)
    K = a.n_cells
    ok_a, why_a = design_enough(a)
    ok_b, why_b = design_enough(b)
    est_a = a.totals / a.n if a.n else np.zeros(K)
    est_b = b.totals / b.n if b.n else np.zeros(K)
    est = est_a - est_b
    few = _frozen((clusters_with_records(a) < MIN_CLUSTERS) | (clusters_with_records(b) < MIN_CLUSTERS))
    method = "bca" if bca else "percentile"
    if not (ok_a and ok_b):
        reason = "; ".join(f"{side}: {why}" for side, why in ((names[0], why_a), (names[1], why_b)) if why)
        z = np.zeros(K)
        return DiffBootstrap(_frozen(est), _frozen(z), _frozen(z.copy()), False, reason, method, few)
    diffs = replicate_proportions(reps_a) - replicate_proportions(reps_b)
    if bca:
        jack = np.vstack([_jackknife_props(a) - est_b, est_a - _jackknife_props(b)])
        lo, hi = _bca(diffs, est, jack, level)
    else:
        lo, hi = _percentile(diffs, level)
    return DiffBootstrap(_frozen(est), _frozen(lo), _frozen(hi), True, "", method, few)


def bootstrap_diff_cell(
    a: ClusterDesign, b: ClusterDesign, k: int, *, B: int, seed: int, level: float = 0.95, stream: int = 0
) -> Interval | None:
    """A percentile interval for one cell's p_a - p_b, or None without enough data."""
    level = _level(level)
    if not (design_enough(a)[0] and design_enough(b)[0]):
        return None
    ra, rb = replicate_blocks([a, b], B=B, seed=seed, stream=stream, threads=1)
    d = replicate_proportions(ra)[:, k] - replicate_proportions(rb)[:, k]
    lo, hi = _percentile(d[:, None], level)
    return Interval(float(a.totals[k] / a.n - b.totals[k] / b.n), float(lo[0]), float(hi[0]))


# ---------------------------------------------------------------------------
# Proportions with Wilson intervals (hold-out coverage)


@dataclass(frozen=True)
class Proportion:
    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None
    enough: bool
    reason: str = ""


def wilson(k: int, n: int, *, level: float = 0.95) -> Proportion:
    """The Wilson score interval for k successes in n trials."""
    from scipy.special import ndtri  # on first use: 25 MB a web process need not load

    level = _level(level)
    if n <= 0:
        return Proportion(k, n, None, None, None, False, "no episodes")
    if not 0 <= k <= n:
        raise ValueError("k must be between 0 and n")
    z = float(ndtri(1 - (1 - level) / 2))
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Proportion(k, n, p, max(0.0, centre - half), min(1.0, centre + half), True)
