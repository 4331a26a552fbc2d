"""Intervals for cells and differences: analytic (the cell-wise Korn-Graubard beta interval, R's svyciprop beta,
design-effect Jeffreys and Wilson) and bootstrap, with the effective sizes they rest on; Wilson intervals for plain
proportions.

Every analytic figure of a cell (design effect, effective size, degrees of freedom, limits) depends only on that
cell's counts per cluster and on the clusters' sizes, so merging or splitting other cells never moves it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lib.stats.bootstrap import (
    BETA_METHODS,
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
    canonical_method,
    design_enough,
    replicate_blocks,
    replicate_proportions,
)
from lib.stats.designs import ClusterDesign, _frozen, _level


def clusters_with_records(design: ClusterDesign) -> np.ndarray:
    """Per cell, how many clusters hold at least one of its episodes."""
    return (design.counts > 0).sum(axis=0)


def effective_clusters(design: ClusterDesign) -> np.ndarray:
    """Per cell, Kish's effective number of clusters holding its episodes, (sum y_g)^2 / sum y_g^2 (0 if none)."""
    C = design.counts.astype(np.float64)
    y = C.sum(axis=0)
    sq = (C * C).sum(axis=0)
    return np.divide(y * y, sq, out=np.zeros_like(y), where=sq > 0)


@dataclass(frozen=True, eq=False)
class EffectiveSizes:
    """Per-cell design effects, effective sample sizes and degrees of freedom of one design.

    `df` is what the lower limit rests on, `df_upper` what the upper limit rests on (see effective_sizes);
    `deff_cap` is the largest design effect the design allows.
    """

    deff: np.ndarray
    n_eff: np.ndarray
    df: np.ndarray
    df_upper: np.ndarray
    deff_cap: float


def bell_mccaffrey_df(sizes: np.ndarray) -> float:
    """Bell and McCaffrey's (2002) degrees of freedom of the CR2 variance of a mean over clusters of these sizes.

    Under the working model of independent records, the CR2-adjusted cluster residual sums e_g / sqrt(1 - h_g)
    (h_g = m_g / N) have covariance O = W^1/2 (diag(m) - m m' / N) W^1/2 with W = diag(1 / (1 - h)), and the
    variance estimate is their sum of squares; its Satterthwaite degrees of freedom are (tr O)^2 / tr(O^2) =
    N^2 / (sum w^2 m^2 - 2 sum w^2 m^3 / N + (sum w m^2)^2 / N^2), computed here in O(G). They equal G - 1 when
    all clusters have the same size and fall towards 1 as one cluster takes over. They depend on the sizes
    only, so every cell of a kind gets the same figure and no other cell can move it.
    """
    m = np.asarray(sizes, dtype=np.float64)
    m = m[m > 0]
    G, N = m.size, float(m.sum())
    if G < 2:
        return 1.0
    w = 1 / (1 - m / N)
    tr2 = (w * w * m * m).sum() - 2 * (w * w * m**3).sum() / N + (w * m * m).sum() ** 2 / N**2
    return float(np.clip(N * N / tr2, 1, G - 1))


def cell_icc(deff: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per cell, the intra-cluster correlation its design effect implies: deff = 1 + (sum m^2 / N - 1) icc
    (Kish's design effect for clusters of unequal sizes), so icc = (deff - 1) / (deff_cap - 1), in [0, 1]
    for a design effect floored at 1 and capped at deff_cap = sum m^2 / N. 0 where no clustering is possible."""
    m = np.asarray(sizes, dtype=np.float64)
    cap = float((m * m).sum() / m.sum()) if m.sum() else 1.0
    if cap <= 1:
        return np.zeros_like(np.asarray(deff, dtype=np.float64))
    return np.clip((np.asarray(deff, dtype=np.float64) - 1) / (cap - 1), 0.0, 1.0)


def clustered_df(
    sizes: np.ndarray, icc: np.ndarray, *, level: float = 0.95, remainder_cap: np.ndarray | None = None
) -> np.ndarray:
    """Per cell, the degrees of freedom of the default interval: Bell and McCaffrey's under the cell's own
    intra-cluster correlation, taking into account that part of the variance estimate moves with the error.

    Working model: the clusters' deviations u_g (cell count minus p m_g) are independent with variances
    V_g = m_g (1 + (m_g - 1) icc), S = sum V; the estimate's error is sum u / N. The CR2 variance is the sum of
    squares of the adjusted residuals W^1/2 e, e = (I - h 1') u, W = diag(1 / (1 - h)). Each residual splits
    into a multiple of the error and a remainder independent of it: e = b (1' u) + r, b = (V - h S) / S,
    Cov(r) = diag(V) - V V' / S. At icc 0 (V = m) b = 0: the residuals are independent of the error and this
    is bell_mccaffrey_df. With clustering, one dominant cluster's residual is most of both the error and the
    variance estimate, so a small variance estimate with a large error, what the t quantile guards against,
    cannot happen for that part. Two figures, and the smaller is taken:

    - spread: (tr O)^2 / tr(O_r^2), O = W^1/2 Cov(e) W^1/2, O_r = W^1/2 Cov(r) W^1/2: Bell and McCaffrey's
      ratio with only the remainder's variability in the denominator. tr O = sum w (V (1 - 2 h) + h^2 S) and
      tr O_r^2 = sum w^2 V^2 - 2 sum w^2 V^3 / S + (sum w V^2)^2 / S^2, O(G) per cell.
    - ratio ceiling: with v = q (1' u)^2 + r' W r (q = sum w b^2), the t ratio of the part that moves with
      the error is 1 / sqrt(q) (1 / sqrt(1 - h) for one cluster of share h), above any normal quantile once
      h passes 0.74. With the remainder as a scaled chi-square on df_r = (tr O_r)^2 / tr(O_r^2) degrees of
      freedom, P(|t| > c) = alpha at c^2 = tau^2 S / (tr O_r + tau^2 S q), tau the t_{df_r} quantile; the
      figure is the df whose t quantile is c (G - 1 where c is below t_{G-1}).

    Both are clipped to [1, G - 1]. The ceiling matters only where one cluster holds most of the records; the
    spread falls where several large clusters share the variance (Pareto sizes) and rises where one cluster
    is most of it. bench/coverage_bench.py and docs/intervals.md give the coverage this buys.

    `remainder_cap` (per cell, the upper limit's figure): the remainder's df_r = (tr O_r)^2 / tr(O_r^2) are
    taken as at most max(remainder_cap, 1), and tr(O_r^2) as (tr O_r)^2 / df_r in the spread. Where no residual
    moves with the error (b = 0, e.g. equal sizes) the result is min(figure, max(cap, 1)); the part tied to the
    error keeps its own ratio whatever the cap.
    """
    from scipy.special import stdtridf, stdtrit  # on first use: 25 MB a web process need not load

    m = np.asarray(sizes, dtype=np.float64)
    m = m[m > 0]
    icc = np.atleast_1d(np.asarray(icc, dtype=np.float64))
    G, N = m.size, float(m.sum())
    if G < 2:
        return np.ones(icc.shape)
    quantile = 1 - (1 - _level(level)) / 2
    h = (m / N)[:, None]
    w = 1 / (1 - h)
    V = m[:, None] * (1 + (m[:, None] - 1) * icc[None, :])
    S = V.sum(axis=0)
    trace = (w * (V * (1 - 2 * h) + h * h * S)).sum(axis=0)
    trace_r = (w * V * (1 - V / S)).sum(axis=0)
    trace2_r = (w * w * V * V).sum(axis=0) - 2 * (w * w * V**3).sum(axis=0) / S + (w * V * V).sum(axis=0) ** 2 / S**2
    df_r = np.clip(trace_r * trace_r / trace2_r, 1, G - 1)
    if remainder_cap is not None:
        df_r = np.minimum(df_r, np.maximum(remainder_cap, 1))
        trace2_r = trace_r * trace_r / df_r
    spread = np.clip(trace * trace / trace2_r, 1, G - 1)
    b = (V - h * S) / S
    q = (w * b * b).sum(axis=0)
    tau = stdtrit(df_r, quantile)
    c = np.sqrt(tau * tau * S / (trace_r + tau * tau * S * q))
    top = stdtrit(G - 1, quantile)
    ceiling = np.where(c <= top, G - 1.0, np.clip(stdtridf(quantile, np.maximum(c, top)), 1, G - 1))
    return np.minimum(spread, ceiling)


def effective_sizes(design: ClusterDesign, *, level: float = 0.95) -> EffectiveSizes:
    """Per-cell design effect, effective sample size N / deff and degrees of freedom, each from the cell alone.

    The variance of p = Y / N under sampling of G clusters is estimated from the
    linearised residuals e_g = y_g - p m_g with the bias-reduced (CR2)
    correction of Bell and McCaffrey (2002): each residual is divided by
    sqrt(1 - h_g), h_g = m_g / N being the cluster's share of the records. deff
    is that variance over the binomial p (1 - p) / N, floored at 1 and capped at
    sum m_g^2 / N, the design effect of repositories that each put all their
    records in one cell (intra-cluster correlation 1): no cluster, however
    dominant, can make an estimate more uncertain than that. A cell with no
    records (or all of them) has no variance of its own: deff 1, the full N
    (cell_intervals gives it the exact binomial bound).

    df (the lower limit's) is clustered_df at `level`: Bell and McCaffrey's
    degrees of freedom under the intra-cluster correlation the cell's design
    effect implies (cell_icc), allowing for the part of the variance estimate
    that moves with the estimate's error (bell_mccaffrey_df of the sizes where
    the cell shows no clustering). When the cell shows clustering (a design
    effect above 1 and some cluster holding two or more of its records), the
    upper limit of a cell whose records are c clusters' worth
    (effective_clusters, Kish) rests on clustered_df with the remainder's
    degrees of freedom at most c - 1 (remainder_cap), and at most df. A share
    held by a few clusters is skewed, its variance estimate is small exactly
    when the share came out small, and the misses are all above the interval
    (bench/coverage_bench.py, miss balance). That holds for the part of the
    variance estimate independent of the error, not for a dominant cluster's
    residual, which moves with the error (a low draw there makes the variance
    estimate large): capping the whole df at c - 1 let one repository with 40%
    of the records, which makes every cell about 6 clusters' worth, rest every
    upper limit on about 5 df (1.55-1.6 times the percentile's width). Where no
    residual moves with the error this is min(df, c - 1) as before. A cell
    whose records each sit in a cluster of their own shows no clustering, and
    one record does not make its upper limit a t with 1 degree of freedom.
    """
    C = design.counts.astype(np.float64)
    m = C.sum(axis=1)
    N = float(m.sum())
    p = C.sum(axis=0) / N
    h = m / N
    scale = np.divide(1.0, 1 - h, out=np.zeros_like(h), where=h < 1)
    v = ((C - np.outer(m, p)) ** 2 * scale[:, None]).sum(axis=0) / N**2
    srs = p * (1 - p) / N
    raw = np.divide(v, srs, out=np.ones_like(p), where=srs > 0)
    cap = max(1.0, float((m * m).sum() / N))
    deff = np.clip(raw, 1.0, cap)
    df = clustered_df(m, cell_icc(deff, m), level=level)
    clustered = (raw > 1) & (C.sum(axis=0) > clusters_with_records(design))
    upper = clustered_df(m, cell_icc(deff, m), level=level, remainder_cap=effective_clusters(design) - 1)
    df_upper = np.where(clustered, np.minimum(df, upper), df)
    return EffectiveSizes(_frozen(deff), _frozen(N / deff), _frozen(df), _frozen(df_upper), cap)


@dataclass(frozen=True, eq=False)
class SurveyBeta:
    """What R's survey::svyciprop(method = "beta") computes per cell for a one-stage cluster design."""

    variance: np.ndarray  # svymean's linearised variance, G / (G - 1) sum_g e_g^2 / N^2
    n_eff: np.ndarray  # p (1 - p) / variance; the full N where that is undefined (see svyciprop_sizes)
    df: float  # degf(design) = G - 1


def svyciprop_sizes(design: ClusterDesign) -> SurveyBeta:
    """The effective sizes of R's svyciprop(method = "beta"), per cell.

    For `svydesign(ids = ~repository, data = episodes)` svymean's variance of
    a share is G / (G - 1) sum_g (y_g - p m_g)^2 / N^2, n.eff = p (1 - p) /
    variance (not floored: it exceeds N when clusters agree more than records
    would) and degf(design) = G - 1. Where R's n.eff is 0 / 0 (a share of 0 or
    1, or clusters all alike) R returns NaN limits; here the full N stands in,
    which makes the interval the exact binomial one.
    """
    C = design.counts.astype(np.float64)
    G = int((C.sum(axis=1) > 0).sum())
    m = C.sum(axis=1)
    N = float(m.sum())
    p = C.sum(axis=0) / N
    v = G / (G - 1) * ((C - np.outer(m, p)) ** 2).sum(axis=0) / N**2
    n_eff = np.divide(p * (1 - p), v, out=np.full(p.shape, N), where=v > 0)
    return SurveyBeta(_frozen(v), _frozen(n_eff), float(G - 1))


def _beta_limits(a_lo, b_lo, a_hi, b_hi, x, n, alpha):
    """Beta-quantile limits, 0 at x = 0 and 1 at x = n (where the lower / upper tail is empty)."""
    from scipy.special import betaincinv  # on first use: 25 MB a web process need not load

    lo = np.where(x > 0, betaincinv(np.maximum(a_lo, 1e-12), np.maximum(b_lo, 1e-12), alpha / 2), 0.0)
    hi = np.where(x < n, betaincinv(np.maximum(a_hi, 1e-12), np.maximum(b_hi, 1e-12), 1 - alpha / 2), 1.0)
    return lo, hi


def exact_binomial_bounds(n: int, *, level: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson upper limit for 0 of n, and the lower limit for n of n (two-sided at `level`)."""
    from scipy.special import betaincinv  # on first use: 25 MB a web process need not load

    alpha = 1 - _level(level)
    upper = float(betaincinv(1.0, float(n), 1 - alpha / 2))
    return upper, 1 - upper


def korn_graubard_limits(p, n_eff, n: int, df, df_upper=None, *, level: float = 0.95):
    """Korn and Graubard's (1998) beta limits: Clopper-Pearson on n_eff scaled by (t_{n-1} / t_df)^2.

    The lower limit takes `df`, the upper one `df_upper` (default: the same). A
    share of 0 gets the exact binomial upper bound on the full n, a share of 1
    the exact lower bound: with no records (or no others) there is no
    between-cluster variance to estimate, and the bound is the binomial one.
    """
    from scipy.special import stdtrit  # on first use: 25 MB a web process need not load

    alpha = 1 - _level(level)
    p, n_eff = np.asarray(p, dtype=np.float64), np.asarray(n_eff, dtype=np.float64)
    df = np.asarray(df, dtype=np.float64)
    df_upper = df if df_upper is None else np.asarray(df_upper, dtype=np.float64)
    if n < 2 or not (df.size and np.all(df >= 1) and np.all(df_upper >= 1)):
        raise ValueError("the beta interval needs n of at least 2 and df of at least 1")
    t_n = stdtrit(n - 1, 1 - alpha / 2)
    n_lo = n_eff * (t_n / stdtrit(df, 1 - alpha / 2)) ** 2
    n_hi = n_eff * (t_n / stdtrit(df_upper, 1 - alpha / 2)) ** 2
    x_lo, x_hi = p * n_lo, p * n_hi
    lo, _ = _beta_limits(x_lo, n_lo - x_lo + 1, x_lo + 1, n_lo - x_lo, x_lo, n_lo, alpha)
    _, hi = _beta_limits(x_hi, n_hi - x_hi + 1, x_hi + 1, n_hi - x_hi, x_hi, n_hi, alpha)
    none, every = exact_binomial_bounds(n, level=level)
    return np.where(p >= 1, every, lo), np.where(p <= 0, none, hi)


def analytic_limits(
    p: np.ndarray,
    n_eff: np.ndarray,
    method: str,
    *,
    level: float = 0.95,
    n: int = 0,
    df: float | np.ndarray = 0.0,
    df_upper: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Limits for shares p observed on effective sample sizes n_eff (x* = p n_eff "successes").

    The beta methods (BETA_METHODS): korn_graubard_limits with n, df and
    df_upper. jeffreys_deff: the Beta(x* + 1/2, n* - x* + 1/2) quantiles.
    wilson_deff: the Wilson score interval on n*.
    """
    method = canonical_method(method)
    p, n_eff = np.asarray(p, dtype=np.float64), np.asarray(n_eff, dtype=np.float64)
    if method in BETA_METHODS:
        return korn_graubard_limits(p, n_eff, n, df, df_upper, level=level)
    alpha = 1 - _level(level)
    x = p * n_eff
    if method == "jeffreys_deff":
        return _beta_limits(x + 0.5, n_eff - x + 0.5, x + 0.5, n_eff - x + 0.5, x, n_eff, alpha)
    if method == "wilson_deff":
        from scipy.special import ndtri  # on first use: 25 MB a web process need not load

        z = ndtri(1 - alpha / 2)
        denom = 1 + z * z / n_eff
        centre = (p + z * z / (2 * n_eff)) / denom
        half = z * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff)) / denom
        return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)
    # A bootstrap method is a cell method too, but has no analytic limits: name the ones that do.
    raise ValueError(f"method must be one of {', '.join(m for m in CELL_METHODS if m not in BOOTSTRAP_METHODS)}")


def cell_intervals(
    design: ClusterDesign, reps: np.ndarray | None, *, level: float = 0.95, bca: bool = False, method: str | None = None
) -> CellBootstrap:
    """Intervals for every cell proportion of one kind.

    `method` is one of CELL_METHODS (default DEFAULT_CELL_METHOD; `bca=True`
    is the old spelling of method="bca"; the old name korn_graubard means the
    default). The bootstrap methods read the replicate counts `reps`; the
    analytic ones need only the design.
    """
    level = _level(level)
    method = canonical_method(method or ("bca" if bca else DEFAULT_CELL_METHOD))
    K = design.n_cells
    ok, reason = design_enough(design)
    est = design.totals / design.n if design.n else np.zeros(K)
    holding = clusters_with_records(design)
    if not ok:
        z = np.zeros(K)
        return CellBootstrap(_frozen(est), _frozen(z), _frozen(z.copy()), False, reason, method, _frozen(holding))
    eff = effective_sizes(design, level=level)
    n_eff, df, df_upper = eff.n_eff, eff.df, eff.df_upper
    spread = _frozen(effective_clusters(design))
    if method in BOOTSTRAP_METHODS:
        if reps is None:
            raise ValueError(f"reps: the {method} method needs replicate counts")
        props = replicate_proportions(reps)
        if method == "bca":
            lo, hi = _bca(props, est, _jackknife_props(design), level)
        else:
            lo, hi = _percentile(props, level)
    elif method == "svyciprop_beta":
        r = svyciprop_sizes(design)
        n_eff, df = r.n_eff, _frozen(np.full(K, r.df))
        df_upper = df
        lo, hi = korn_graubard_limits(est, n_eff, design.n, r.df, level=level)
    else:
        lo, hi = analytic_limits(est, n_eff, method, level=level, n=design.n, df=df, df_upper=df_upper)
    return CellBootstrap(
        _frozen(est), _frozen(lo), _frozen(hi), True, "", method, _frozen(holding), n_eff, df, df_upper, spread
    )


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
    """Intervals for p_a - p_b per cell; the two kinds are resampled independently.

    `few_clusters` marks cells where either kind's records are fewer than MIN_CLUSTERS clusters' worth
    (effective_clusters).
    """
    level = _level(level)
    K = a.n_cells
    ok_a, why_a = design_enough(a)
    ok_b, why_b = design_enough(b)
    est_a = a.totals / a.n if a.n else np.zeros(K)
    est_b = b.totals / b.n if b.n else np.zeros(K)
    est = est_a - est_b
    few = _frozen((effective_clusters(a) < MIN_CLUSTERS) | (effective_clusters(b) < MIN_CLUSTERS))
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
