"""Pure statistics for Faultline's analysis: numpy arrays in, frozen dataclasses out.

Nothing here touches the ORM. `annotate/analysis.py` builds the arrays from a
study and turns these results into JSON documents, pages and figures.

Conventions
- Codes are small non-negative integers indexing a label tuple held by the
  caller; -1 means "missing" (no rating, no code).
- Arrays inside results are made read-only, so a frozen result really is.
- "Not enough data" is a value (`enough=False` and a `reason`), never NaN and
  never an exception: an empty study is a normal state of a new study.

Bootstrap streams
Replicates are drawn in fixed blocks of `BLOCK` replicates. Block i draws from
its own generator, seeded with `SeedSequence(seed, spawn_key=(i,))` (what
`SeedSequence(seed).spawn(n)[i]` gives, for any n). So replicate r is the same
number whether the B replicates are computed in one call, in threads, or in
chunks spread over Celery workers: only the block boundaries matter, and they
are fixed.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betaincinv, ndtr, ndtri, stdtrit

BLOCK = 128  # replicates per seeded block; part of the stream definition, never change silently
FLOAT32_EXACT = 2**24  # integer sums below this are exact in float32
LIGHT_CELLS = 1 << 21  # index draws held in memory at once, per thread
HEAVY_MULTIPLICITY = 4  # identical clusters at least this many times are drawn by multinomial

MIN_CLUSTERS = 5  # an interval resting on fewer clusters with records is flagged
UNDEFINED_WARN = 0.05  # above this share of undefined bootstrap replicates an agreement interval says so

ProgressFn = Callable[[int, int], None]


# ---------------------------------------------------------------------------
# Input checks: every public function fails loudly, naming the argument


def _codes(values, name: str) -> np.ndarray:
    """Integer codes with -1 for missing; fractional or non-finite codes and codes below -1 are errors.

    Silently truncating 0.9 to 0, or counting -2 as missing, would change a
    statistic without a word.
    """
    a = np.asarray(values)
    if a.dtype.kind not in "iub":
        try:
            f = a.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must hold integer codes") from None
        if not np.all(np.isfinite(f)) or not np.array_equal(f, np.floor(f)):
            raise ValueError(f"{name} must hold whole-number codes (-1 for missing)")
        a = f
    a = a.astype(np.int64)
    if a.size and a.min() < -1:
        raise ValueError(f"{name} holds codes below -1 (only -1 means missing)")
    return a


def _count(value, name: str, low: int = 1) -> int:
    """A whole number of at least `low` (booleans and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be a whole number of at least {low}")
    return int(value)


def _level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, int | float | np.floating) or not 0 < level < 1:
        raise ValueError("level must be between 0 and 1 (exclusive), e.g. 0.95")
    return float(level)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    a.flags.writeable = False
    return a


# ---------------------------------------------------------------------------
# Matrices and distributions


@dataclass(frozen=True, eq=False)
class CellMatrix:
    """A rows x cols count matrix (stage x capability) with margins and proportions of n."""

    counts: np.ndarray
    n: int
    enough: bool
    reason: str = ""

    @property
    def row_totals(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def col_totals(self) -> np.ndarray:
        return self.counts.sum(axis=0)

    @property
    def proportions(self) -> np.ndarray:
        """Cell share of the kind's episodes; zeros when there are none (check `enough`)."""
        return self.counts / self.n if self.n else np.zeros(self.counts.shape)


def cell_matrix(rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int) -> CellMatrix:
    """Count (row, col) pairs; pairs with a missing (-1) code are not counted."""
    rows, cols = _codes(rows, "rows"), _codes(cols, "cols")
    if rows.shape != cols.shape:
        raise ValueError("rows and cols must have the same length")
    if (rows.size and rows.max() >= n_rows) or (cols.size and cols.max() >= n_cols):
        raise ValueError("rows or cols hold a code out of range")
    ok = (rows >= 0) & (cols >= 0)
    flat = rows[ok] * n_cols + cols[ok]
    counts = np.bincount(flat, minlength=n_rows * n_cols).reshape(n_rows, n_cols)
    n = int(counts.sum())
    return CellMatrix(_frozen(counts), n, n > 0, "" if n else "no episodes")


@dataclass(frozen=True, eq=False)
class Distribution:
    """Counts of one code (failure type, category, source) with shares of n."""

    counts: np.ndarray
    n: int
    missing: int  # values coded -1 (e.g. "needs a new type" for failure types)

    @property
    def proportions(self) -> np.ndarray:
        return self.counts / self.n if self.n else np.zeros(self.counts.shape)


def distribution(values: np.ndarray, n_codes: int) -> Distribution:
    values = _codes(values, "values")
    if values.size and values.max() >= n_codes:
        raise ValueError("values hold a code out of range")
    ok = values >= 0
    counts = np.bincount(values[ok], minlength=n_codes)
    return Distribution(_frozen(counts), int(values.size), int((~ok).sum()))


# ---------------------------------------------------------------------------
# Cluster designs and bootstrap replicates


@dataclass(frozen=True, eq=False)
class ClusterDesign:
    """One kind's data as a cluster x cell count matrix, clusters in sorted-name order.

    `cells` and `episode_cluster` keep the episode-level view (sorted by cluster,
    then cell) for checks that subsample episodes.
    """

    counts: np.ndarray  # G x K
    names: tuple[str, ...]  # cluster names, sorted
    cells: np.ndarray  # per episode, sorted by (cluster, cell)
    episode_cluster: np.ndarray

    @property
    def n_clusters(self) -> int:
        return self.counts.shape[0]

    @property
    def n_cells(self) -> int:
        return self.counts.shape[1]

    @property
    def sizes(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def totals(self) -> np.ndarray:
        return self.counts.sum(axis=0)

    @property
    def n(self) -> int:
        return int(self.counts.sum())


def cluster_design(cells: np.ndarray, clusters: Sequence[str] | np.ndarray, n_cells: int) -> ClusterDesign:
    """Build a design from per-episode cell indices and cluster names (any row order).

    Clusters are sorted by name, so shuffling the input rows changes nothing.
    """
    cells = _codes(cells, "cells")
    raw = np.asarray(clusters, dtype=object).ravel()
    if raw.size != cells.size:
        raise ValueError("cells and clusters must have the same length")
    names_arr = raw.astype(str) if len(cells) else np.array([], dtype=str)
    if cells.size and (cells.min() < 0 or cells.max() >= n_cells):
        raise ValueError("cells hold a cell index out of range")
    if len({type(x) for x in raw.tolist()}) > 1:
        # 1 and "1" would become one cluster; refuse rather than merge two repositories.
        distinct = {(type(x).__name__, str(x)) for x in raw.tolist()}
        if len(distinct) > len(set(names_arr.tolist())):
            raise ValueError("clusters mix types whose names collide (e.g. 1 and '1'); give every name as a string")
    names, g = np.unique(names_arr, return_inverse=True)
    g = g.astype(np.int64).ravel()
    counts = np.bincount(g * n_cells + cells, minlength=len(names) * n_cells).reshape(len(names), n_cells)
    order = np.lexsort((cells, g))
    return ClusterDesign(
        counts=_frozen(counts),
        names=tuple(str(x) for x in names),
        cells=_frozen(cells[order]),
        episode_cluster=_frozen(g[order]),
    )


def counts_design(counts: np.ndarray) -> ClusterDesign:
    """A design known by its cluster x cell count matrix alone (clusters named by their row).

    Replicates depend only on the counts, so a Celery chunk rebuilds the designs
    from these few integers instead of re-reading and re-sorting cluster names.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or (counts.size and counts.min() < 0):
        raise ValueError("counts must be a 2-D matrix of non-negative integers")
    G, K = counts.shape
    sizes = counts.sum(axis=1)
    return ClusterDesign(
        counts=_frozen(counts),
        names=tuple(str(i) for i in range(G)),
        cells=_frozen(np.repeat(np.tile(np.arange(K, dtype=np.int64), G), counts.ravel())),
        episode_cluster=_frozen(np.repeat(np.arange(G, dtype=np.int64), sizes)),
    )


def design_without(design: ClusterDesign, drop: Sequence[int]) -> ClusterDesign:
    """The design with some clusters removed."""
    keep = np.ones(design.n_clusters, dtype=bool)
    keep[list(drop)] = False
    remap = np.cumsum(keep) - 1
    ep_keep = keep[design.episode_cluster]
    return ClusterDesign(
        counts=_frozen(design.counts[keep]),
        names=tuple(n for n, k in zip(design.names, keep, strict=True) if k),
        cells=_frozen(design.cells[ep_keep]),
        episode_cluster=_frozen(remap[design.episode_cluster[ep_keep]]),
    )


def record_design(design: ClusterDesign) -> ClusterDesign:
    """Every episode its own cluster: the ordinary record-level bootstrap."""
    n = design.n
    counts = np.zeros((n, design.n_cells), dtype=np.int64)
    counts[np.arange(n), design.cells] = 1
    return ClusterDesign(
        counts=_frozen(counts),
        names=tuple(f"{design.names[g]}#{i}" for i, g in enumerate(design.episode_cluster)),
        cells=design.cells,
        episode_cluster=_frozen(np.arange(n)),
    )


@dataclass(frozen=True, eq=False)
class _Plan:
    """How one design's replicates are drawn: identical clusters are grouped.

    Resampling G clusters with replacement only matters through how often each
    distinct count row is drawn. Rows shared by many clusters ("heavy" types,
    e.g. the many one-issue repositories) are drawn as a multinomial over
    types; the remaining clusters by uniform index draws and counting. The two
    parts are combined exactly: the number of draws that land on heavy clusters
    is Binomial(G, G_heavy / G).
    """

    G: int
    heavy_rows: np.ndarray  # T_h x K
    heavy_p: np.ndarray  # T_h, multiplicities / G_heavy
    G_heavy: int
    light_rows: np.ndarray  # G_l x K, one per light cluster
    dtype: type


_ROW_HASH = np.random.default_rng(20250101).integers(1, 2**62, size=(2, 4096), dtype=np.int64).astype(np.uint64)


def _unique_rows(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of C (in a fixed order) and how often each occurs.

    np.unique(axis=0) sorts rows as void bytes, which is slow for tens of
    thousands of rows; a 64-bit row hash sorts fast, and every row is checked
    against its group's representative, falling back on a collision.
    """
    if C.shape[0] == 0:
        return np.zeros((0, C.shape[1]), dtype=np.int64), np.zeros(0, dtype=np.int64)
    if C.shape[1] > _ROW_HASH.shape[1]:
        return np.unique(C, axis=0, return_counts=True)
    with np.errstate(over="ignore"):
        h = C.astype(np.uint64) @ _ROW_HASH[0, : C.shape[1]]
    _, first, inverse, mult = np.unique(h, return_index=True, return_inverse=True, return_counts=True)
    rows = C[first]
    if not np.array_equal(rows[inverse.ravel()], C):
        return np.unique(C, axis=0, return_counts=True)
    return rows, mult


def _plan(design: ClusterDesign) -> _Plan:
    C = design.counts
    G = C.shape[0]
    rows, mult = _unique_rows(C)
    heavy = mult >= HEAVY_MULTIPLICITY
    light_rows = np.repeat(rows[~heavy], mult[~heavy], axis=0)
    g_heavy = int(mult[heavy].sum())
    biggest = int(C.sum(axis=1).max()) if G else 0
    dtype = np.float32 if G * biggest < FLOAT32_EXACT else np.float64
    return _Plan(
        G=G,
        heavy_rows=rows[heavy].astype(dtype),
        heavy_p=mult[heavy] / g_heavy if g_heavy else np.zeros(0),
        G_heavy=g_heavy,
        light_rows=light_rows.astype(dtype),
        dtype=dtype,
    )


def _draw_block(plan: _Plan, rng: np.random.Generator, b: int) -> np.ndarray:
    """Replicate cell counts (b x K) for one design: G clusters drawn with replacement, b times."""
    K = plan.light_rows.shape[1]
    out = np.zeros((b, K), dtype=plan.dtype)
    if plan.G == 0:
        return out
    G_l = plan.G - plan.G_heavy
    n_heavy = rng.binomial(plan.G, plan.G_heavy / plan.G, size=b) if plan.G_heavy else np.zeros(b, dtype=np.int64)
    if plan.G_heavy:
        # Multinomial per replicate with its own count: numpy broadcasts n over size.
        w = rng.multinomial(n_heavy, plan.heavy_p, size=b)
        out += w.astype(plan.dtype) @ plan.heavy_rows
    if G_l:
        n_light = plan.G - n_heavy
        # Rows in fixed sub-chunks bound memory (about LIGHT_CELLS draws at a time); the
        # sub-chunks depend only on the data, so the stream stays the same everywhere.
        step = max(1, LIGHT_CELLS // G_l)
        for r0 in range(0, b, step):
            r1 = min(b, r0 + step)
            counts = n_light[r0:r1]
            idx = rng.integers(0, G_l, size=int(counts.sum()), dtype=np.int64)
            idx += np.repeat(np.arange(r1 - r0, dtype=np.int64) * G_l, counts)
            w = np.bincount(idx, minlength=(r1 - r0) * G_l).reshape(r1 - r0, G_l)
            out[r0:r1] += w.astype(plan.dtype) @ plan.light_rows
    return out


def _block_rng(seed: int, block: int, stream: int = 0) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream, block)))


def n_blocks(B: int) -> int:
    return -(-B // BLOCK)


def replicate_blocks(
    designs: Sequence[ClusterDesign],
    *,
    B: int,
    seed: int,
    start: int = 0,
    stop: int | None = None,
    stream: int = 0,
    threads: int | None = None,
    progress: ProgressFn | None = None,
) -> list[np.ndarray]:
    """Replicate cell counts for blocks [start, stop) of a B-replicate run, one int array per design.

    Each block draws every design in order from its own seeded generator, so a
    block's numbers do not depend on which call, thread or worker computes it.
    Threads work on whole blocks with BLAS held to one thread: the draws and the
    counting dominate, and numpy releases the GIL for both.
    """
    B = _count(B, "B")
    total = n_blocks(B)
    stop = total if stop is None else min(stop, total)
    plans = [_plan(d) for d in designs]
    sizes = [min(BLOCK, B - i * BLOCK) for i in range(start, stop)]
    rows = sum(sizes)
    # int32 halves the memory of large runs; a replicate count never nears 2**31.
    out = [np.zeros((rows, d.n_cells), dtype=np.int32) for d in designs]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    def run(j: int) -> None:
        rng = _block_rng(seed, start + j, stream)
        for plan, arr in zip(plans, out, strict=True):
            arr[offsets[j] : offsets[j + 1]] = np.rint(_draw_block(plan, rng, sizes[j]))

    n_jobs = stop - start
    if threads is None:
        # Threads pay off only when blocks are big enough to release the GIL for long.
        big = sum(p.light_rows.shape[0] for p in plans) >= 5000
        threads = min(4, os.cpu_count() or 1) if big else 1
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        if threads <= 1 or n_jobs < 4:
            for j in range(n_jobs):
                run(j)
                if progress and (j % 64 == 63 or j == n_jobs - 1):
                    progress(j + 1, n_jobs)
        else:
            with ThreadPoolExecutor(threads) as pool:
                for done, _ in enumerate(pool.map(run, range(n_jobs)), start=1):
                    if progress and (done % 64 == 0 or done == n_jobs):
                        progress(done, n_jobs)
    return out


# ---------------------------------------------------------------------------
# Intervals


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _percentile(reps: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = 1 - _level(level)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2], axis=0)
    return lo, hi


def _bca(reps: np.ndarray, est: np.ndarray, jack: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """BCa limits per column: bias from the replicates, acceleration from the jackknife (J x K)."""
    B = reps.shape[0]
    below = (reps < est).sum(axis=0) + 0.5 * (reps == est).sum(axis=0)
    z0 = ndtri(np.clip(below / B, 1 / (B + 1), B / (B + 1)))
    d = jack.mean(axis=0) - jack
    num = (d**3).sum(axis=0)
    den = 6 * ((d**2).sum(axis=0)) ** 1.5
    a = np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0)
    alpha = 1 - level
    lo_hi = []
    for z in (ndtri(alpha / 2), ndtri(1 - alpha / 2)):
        adj = ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))
        lo_hi.append(adj)
    sorted_reps = np.sort(reps, axis=0)
    cols = np.arange(reps.shape[1])
    limits = []
    for q in lo_hi:
        pos = np.clip(q * (B - 1), 0, B - 1)
        lo_i, hi_i = np.floor(pos).astype(int), np.ceil(pos).astype(int)
        frac = pos - lo_i
        limits.append(sorted_reps[lo_i, cols] * (1 - frac) + sorted_reps[hi_i, cols] * frac)
    return limits[0], limits[1]


def _jackknife_props(design: ClusterDesign) -> np.ndarray:
    """Leave-one-cluster-out cell proportions (G x K)."""
    C = design.counts
    rest = design.totals[None, :] - C
    n_rest = (design.n - design.sizes)[:, None]
    return np.divide(rest, n_rest, out=np.zeros(rest.shape), where=n_rest > 0)


# ---------------------------------------------------------------------------
# Cluster bootstrap of cell proportions and of differences between kinds


CELL_METHODS = ("korn_graubard", "jeffreys_deff", "wilson_deff", "percentile", "bca")
DEFAULT_CELL_METHOD = "korn_graubard"
CELL_METHOD_NAMES = {
    "korn_graubard": "Korn-Graubard (Clopper-Pearson on the design-effect effective sample size)",
    "jeffreys_deff": "Jeffreys on the design-effect effective sample size",
    "wilson_deff": "Wilson on the design-effect effective sample size",
    "percentile": "cluster bootstrap, percentile",
    "bca": "cluster bootstrap, BCa",
}
BOOTSTRAP_METHODS = ("percentile", "bca")


@dataclass(frozen=True, eq=False)
class CellBootstrap:
    """Per-cell proportion estimates and intervals for one kind (flattened K cells).

    `clusters_with_records` counts, per cell, the clusters holding at least one
    of its episodes; an interval resting on fewer than MIN_CLUSTERS of them is
    flagged (`few_clusters`). `n_eff` is the design-effect effective sample size
    the analytic methods use (N / deff, deff floored at 1).
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    enough: bool
    reason: str = ""
    method: str = "percentile"
    clusters_with_records: np.ndarray | None = None
    n_eff: np.ndarray | None = None

    @property
    def few_clusters(self) -> np.ndarray:
        return self.clusters_with_records < MIN_CLUSTERS


@dataclass(frozen=True, eq=False)
class DiffBootstrap:
    """Per-cell differences p_a - p_b with intervals; `few_clusters` when either side rests on < MIN_CLUSTERS."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    enough: bool
    reason: str = ""
    method: str = "percentile"
    few_clusters: np.ndarray | None = None

    @property
    def excludes_zero(self) -> np.ndarray:
        return (self.low > 0) | (self.high < 0)


def design_enough(design: ClusterDesign) -> tuple[bool, str]:
    if design.n == 0:
        return False, "no episodes"
    if design.n_clusters < 2:
        return False, "fewer than 2 clusters: the bootstrap cannot resample"
    return True, ""


def replicate_proportions(counts: np.ndarray) -> np.ndarray:
    """Replicate cell counts (B x K) → proportions of each replicate's own total."""
    tot = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, tot, out=np.zeros(counts.shape), where=tot > 0)


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
# Sensitivity checks for one cell and contrast


@dataclass(frozen=True)
class SensitivityCheck:
    name: str
    description: str
    estimate: float | None
    low: float | None
    high: float | None
    keeps_sign: bool | None
    excludes_zero: bool | None
    detail: dict = field(default_factory=dict)
    enough: bool = True
    reason: str = ""


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _capped(design: ClusterDesign, cap: int, rng: np.random.Generator) -> ClusterDesign:
    """Keep at most `cap` random episodes of each cluster."""
    keys = rng.random(design.n)
    order = np.lexsort((keys, design.episode_cluster))
    g = design.episode_cluster[order]
    start = np.searchsorted(g, np.arange(design.n_clusters))
    rank = np.arange(design.n) - start[g]
    keep = order[rank < cap]
    cells, clusters = design.cells[keep], np.asarray(design.names, dtype=object)[design.episode_cluster[keep]]
    return cluster_design(cells, clusters, design.n_cells)


def sensitivity(
    a: ClusterDesign,
    b: ClusterDesign,
    k: int,
    *,
    B: int,
    seed: int,
    level: float = 0.95,
    cap: int = 5,
    subsamples: int = 20,
    baseline: Interval | None = None,
) -> list[SensitivityCheck]:
    """Robustness of p_a - p_b in cell k: leave-one-cluster-out, a per-cluster cap,
    dropping the largest cluster, and the record-level bootstrap.

    Every check reports whether the contrast keeps the baseline's sign and
    whether its interval stays clear of zero. Interval checks reuse B replicates
    on their own seeded streams (1, 2, ...) so they never share draws with the
    main run.
    """
    if not (design_enough(a)[0] and design_enough(b)[0]):
        reason = design_enough(a)[1] or design_enough(b)[1]
        return [SensitivityCheck(n, d, None, None, None, None, None, enough=False, reason=reason) for n, d in _CHECKS]
    base = baseline or bootstrap_diff_cell(a, b, k, B=B, seed=seed, level=level)
    sign = _sign(base.estimate)
    checks = []

    # Leave one cluster out, from either kind.
    pa, pb = a.totals[k] / a.n, b.totals[k] / b.n
    loo_a = _jackknife_props(a)[:, k] - pb
    loo_b = pa - _jackknife_props(b)[:, k]
    # A kind with one cluster left after removal has no estimate; keep only defined ones.
    loo = np.concatenate([loo_a[a.n - a.sizes > 0], loo_b[b.n - b.sizes > 0]])
    labels = [f"a:{n}" for n, s in zip(a.names, a.sizes, strict=True) if a.n - s > 0] + [
        f"b:{n}" for n, s in zip(b.names, b.sizes, strict=True) if b.n - s > 0
    ]
    worst = int(np.argmax(np.abs(loo - base.estimate)))
    side, name = labels[worst].split(":", 1)
    drop_a = design_without(a, [a.names.index(name)]) if side == "a" else a
    drop_b = design_without(b, [b.names.index(name)]) if side == "b" else b
    iv = bootstrap_diff_cell(drop_a, drop_b, k, B=B, seed=seed, level=level, stream=1)
    checks.append(
        SensitivityCheck(
            "leave_one_cluster_out",
            _CHECKS[0][1],
            float(loo[worst]),
            iv.low if iv else None,
            iv.high if iv else None,
            bool(np.all(np.sign(loo) == sign)),
            iv.excludes_zero if iv else None,
            {
                "min": float(loo.min()),
                "max": float(loo.max()),
                "most_influential": {"side": side, "cluster": name, "shift": float(loo[worst] - base.estimate)},
                "n_clusters": len(loo),
            },
        )
    )

    # Cap each cluster at `cap` episodes, averaged over random subsamples.
    rng = _block_rng(seed, 0, stream=2)
    ests, reps = [], []
    b_each = max(BLOCK, -(-B // subsamples))
    for s in range(subsamples):
        ca, cb = _capped(a, cap, rng), _capped(b, cap, rng)
        if ca.n == 0 or cb.n == 0:
            continue
        ests.append(ca.totals[k] / ca.n - cb.totals[k] / cb.n)
        if design_enough(ca)[0] and design_enough(cb)[0]:
            ra, rb = replicate_blocks([ca, cb], B=b_each, seed=seed, stream=100 + s, threads=1)
            reps.append(replicate_proportions(ra)[:, k] - replicate_proportions(rb)[:, k])
    est = float(np.mean(ests)) if ests else None
    pooled = np.concatenate(reps) if reps else None
    lo, hi = (float(x[0]) for x in _percentile(pooled[:, None], level)) if pooled is not None else (None, None)
    checks.append(
        SensitivityCheck(
            "cluster_cap",
            _CHECKS[1][1].format(cap=cap),
            est,
            lo,
            hi,
            (_sign(est) == sign) if est is not None else None,
            (lo > 0 or hi < 0) if lo is not None else None,
            {"cap": cap, "subsamples": len(ests), "min": float(np.min(ests)), "max": float(np.max(ests))}
            if ests
            else {"cap": cap, "subsamples": 0},
        )
    )

    # Drop the largest cluster of each kind (kinds whose clusters all hold one episode keep theirs).
    la, lb = int(np.argmax(a.sizes)), int(np.argmax(b.sizes))
    drop_a, drop_b = a.sizes[la] > 1, b.sizes[lb] > 1
    da = design_without(a, [la]) if drop_a else a
    db = design_without(b, [lb]) if drop_b else b
    dropped = {
        "a": a.names[la] if drop_a else None,
        "a_size": int(a.sizes[la]) if drop_a else 0,
        "b": b.names[lb] if drop_b else None,
        "b_size": int(b.sizes[lb]) if drop_b else 0,
    }
    if not (drop_a or drop_b):
        checks.append(
            SensitivityCheck(
                "drop_largest_cluster", _CHECKS[2][1], None, None, None, None, None, dropped, False,
                "no cluster holds more than one episode",
            )
        )  # fmt: skip
    else:
        # Both kinds keep episodes: each had two or more clusters, and only one is dropped.
        iv = bootstrap_diff_cell(da, db, k, B=B, seed=seed, level=level, stream=3)
        est = float(da.totals[k] / da.n - db.totals[k] / db.n)
        checks.append(
            SensitivityCheck(
                "drop_largest_cluster",
                _CHECKS[2][1],
                est,
                iv.low if iv else None,
                iv.high if iv else None,
                _sign(est) == sign,
                iv.excludes_zero if iv else None,
                dropped,
            )
        )

    # Record-level bootstrap: what ignoring the clustering would claim.
    iv = bootstrap_diff_cell(record_design(a), record_design(b), k, B=B, seed=seed, level=level, stream=4)
    width = base.high - base.low
    checks.append(
        SensitivityCheck(
            "record_bootstrap",
            _CHECKS[3][1],
            iv.estimate,
            iv.low,
            iv.high,
            _sign(iv.estimate) == sign,
            iv.excludes_zero,
            {
                "cluster_width": float(width),
                "record_width": float(iv.high - iv.low),
                "widening": float(width / (iv.high - iv.low)) if iv.high > iv.low else None,
            },
        )
    )
    return checks


_CHECKS = (
    ("leave_one_cluster_out", "Leave one cluster out: the range of the contrast, and the cluster that moves it most"),
    ("cluster_cap", "At most {cap} episodes per cluster, averaged over random subsamples"),
    ("drop_largest_cluster", "Without the largest cluster of each kind (clusters of one episode are kept)"),
    ("record_bootstrap", "Ordinary record-level bootstrap (ignores clustering)"),
)


# ---------------------------------------------------------------------------
# Agreement between coders


ONE_SIDED_METHOD = "clopper_pearson_one_sided"


@dataclass(frozen=True)
class Estimate:
    """A statistic with its interval; value None means not defined here (see reason).

    `undefined_share` is the share of bootstrap replicates in which the
    statistic was undefined (they are left out of the interval); above
    UNDEFINED_WARN, `warning` says so and why. `method` is "percentile" or,
    at perfect or near-perfect agreement, ONE_SIDED_METHOD: then `low` is a
    one-sided lower bound at the stated level and `high` the maximum, 1.
    """

    value: float | None
    low: float | None = None
    high: float | None = None
    reason: str = ""
    undefined_share: float = 0.0
    warning: str = ""
    method: str = "percentile"

    @property
    def one_sided(self) -> bool:
        return self.method == ONE_SIDED_METHOD


@dataclass(frozen=True, eq=False)
class PairAgreement:
    coder_a: int
    coder_b: int
    n: int  # units both coded
    percent: Estimate
    kappa: Estimate
    confusion: np.ndarray  # Q x Q, rows coder_a
    disagreeing: int = 0  # units both coded on which they differ


@dataclass(frozen=True, eq=False)
class AxisAgreement:
    n_units: int  # units with at least two ratings
    n_ratings: int
    percent: Estimate
    fleiss_kappa: Estimate
    krippendorff_alpha: Estimate
    gwet_ac1: Estimate
    pairs: tuple[PairAgreement, ...]
    specific: np.ndarray  # per category: specific (positive) agreement, -1 when never used
    specific_n: np.ndarray  # per category: number of ratings in pairable units
    enough: bool
    reason: str = ""
    n_rated: int = 0  # units with at least one rating (they enter the chance terms)
    chance_categories: int = 0  # Q in AC1's chance term
    disagreeing: int = 0  # pairable units with any disagreement


def _unit_counts(codes: np.ndarray, Q: int) -> np.ndarray:
    """U x Q matrix of how many coders gave each category to each unit."""
    U, R = codes.shape
    ok = codes >= 0
    rows = np.repeat(np.arange(U), R).reshape(U, R)[ok]
    return np.bincount(rows * Q + codes[ok], minlength=U * Q).reshape(U, Q).astype(np.float64)


def _weight_chunks(U: int, B: int, seed: int, stream: int, max_cells: int = 1 << 22):
    """B x U bootstrap weights over units, in chunks of whole seeded blocks to bound memory."""
    per = max(1, max_cells // (BLOCK * max(U, 1)))
    for first in range(0, n_blocks(B), per):
        blocks = range(first, min(first + per, n_blocks(B)))
        parts = []
        for i in blocks:
            b = min(BLOCK, B - i * BLOCK)
            rng = _block_rng(seed, i, stream)
            idx = rng.integers(0, U, size=(b, U), dtype=np.int64) + (np.arange(b) * U)[:, None]
            parts.append(np.bincount(idx.ravel(), minlength=b * U).reshape(b, U))
        yield np.vstack(parts).astype(np.float64)


def _agreement_stats(Wt: np.ndarray, N: np.ndarray, pairable: np.ndarray, Qc: int) -> dict[str, np.ndarray]:
    """Percent agreement, Fleiss' kappa, Krippendorff's alpha and Gwet's AC1 for each weight row.

    N holds every unit with at least one rating; `pairable` marks those with
    two or more. These are Gwet's generalised formulas (Handbook of
    Inter-Rater Reliability, 4th ed., ch. 2 and 5; the irrCAC package):
    observed agreement p_a averages, over pairable units, the share of
    agreeing rater pairs; the chance terms use pi_k, the mean over *all* rated
    units of the unit's share of ratings in k (a unit coded once still tells
    which categories coders use). Fleiss: p_e = sum pi_k^2. AC1: p_e =
    sum pi_k (1 - pi_k) / (Qc - 1), Qc being the codebook's categories for the
    axis. Krippendorff's alpha uses pairable units only (its coincidence
    matrix). Every statistic is a ratio of weighted sums over units, so one
    matrix product evaluates all replicates.
    """
    Np, Wp = N[pairable], Wt[:, pairable]
    m = Np.sum(axis=1)
    sq = (Np**2).sum(axis=1)
    agree_pairs = (sq - m) / (m * (m - 1))  # share of agreeing ordered pairs in each unit
    wsum = Wp.sum(axis=1)
    m1 = N.sum(axis=1)
    nc = Wp @ Np  # category totals over ratings of pairable units
    n = nc.sum(axis=1)
    do = Wp @ ((m**2 - sq) / (m - 1))
    de = n**2 - (nc**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (Wp @ agree_pairs) / wsum
        pi = (Wt @ (N / m1[:, None])) / Wt.sum(axis=1)[:, None]
        pe_f = (pi**2).sum(axis=1)
        pe_g = (pi * (1 - pi)).sum(axis=1) / (Qc - 1) if Qc > 1 else np.ones_like(po)
        fleiss = np.where(pe_f < 1 - 1e-12, (po - pe_f) / (1 - pe_f), np.nan)
        alpha = np.where(de > 0, 1 - (n - 1) * do / de, np.nan)
        ac1 = np.where(pe_g < 1 - 1e-12, (po - pe_g) / (1 - pe_g), np.nan)
    return {"percent": po, "fleiss": fleiss, "alpha": alpha, "ac1": ac1, "pe_f": pe_f, "pe_g": pe_g, "n": n, "de": de}


def _pair_stats(Wt: np.ndarray, eq: np.ndarray, onehot_a: np.ndarray, onehot_b: np.ndarray) -> dict[str, np.ndarray]:
    """Observed agreement and Cohen's kappa of one coder pair, for each weight row."""
    tot = Wt.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (Wt @ eq) / tot
        pe = ((Wt @ onehot_a) * (Wt @ onehot_b)).sum(axis=1) / tot**2
        kappa = np.where((tot > 0) & (pe < 1 - 1e-12), (po - pe) / (1 - pe), np.nan)
    return {"percent": po, "kappa": kappa, "pe": pe}


def one_sided_disagreement(disagreeing: int, units: int, *, level: float = 0.95) -> float:
    """Clopper-Pearson one-sided upper bound on the share of disagreeing units (exact, never 0)."""
    level = _level(level)
    if units < 1 or not 0 <= disagreeing <= units:
        raise ValueError("disagreeing must be between 0 and units, and units at least 1")
    if disagreeing == units:
        return 1.0
    return float(betaincinv(disagreeing + 1, units - disagreeing, level))


def _estimate(values: np.ndarray, level: float, undefined: str, replicate_reason: str, bound=None) -> Estimate:
    """Sample value (row 0) with a percentile interval over the defined replicates.

    At perfect agreement, or when the percentile interval reaches perfect
    agreement (at least (1 - level) / 2 of the defined resamples hold no
    disagreement, so its upper limit says nothing and its lower limit rests on
    a handful of units), the one-sided lower `bound` replaces it.
    """
    v = values[0]
    if not np.isfinite(v):
        return Estimate(None, reason=undefined)
    reps = values[1:]
    defined = np.isfinite(reps)
    share = float((~defined).sum() / defined.size)
    warning = ""
    if share > UNDEFINED_WARN:
        warning = (
            f"{share:.0%} of bootstrap replicates were undefined ({replicate_reason}) and are left out; "
            "the interval describes the resamples where it is defined"
        )
    reps = reps[defined]
    lo = hi = None
    if reps.size >= 2:
        lo, hi = (float(x) for x in np.quantile(reps, [(1 - level) / 2, 1 - (1 - level) / 2]))
    if bound is not None and (v >= 1 - 1e-12 or (hi is not None and hi >= 1 - 1e-12)):
        return Estimate(float(v), float(min(bound, v)), 1.0, "", share, warning, ONE_SIDED_METHOD)
    if lo is None:
        return Estimate(float(v), reason="too few defined replicates for an interval", undefined_share=share,
                        warning=warning)  # fmt: skip
    return Estimate(float(v), lo, hi, "", share, warning)


def _onehot(codes: np.ndarray, Q: int) -> np.ndarray:
    out = np.zeros((codes.size, Q))
    out[np.arange(codes.size), codes] = 1
    return out


_ONE_CATEGORY = "every rating in the resample fell in one category"
_NO_PAIRS = "the resample drew no episode coded by two or more coders"
_ONE_PAIR_CATEGORY = "both coders used one and the same category: kappa is undefined"
_ONE_PAIR_CATEGORY_RESAMPLE = "both coders used one and the same category in the resample"


def agreement(
    codes: np.ndarray,
    n_categories: int,
    *,
    B: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    chance_categories: int | None = None,
) -> AxisAgreement:
    """Agreement on one axis. `codes` is units x coders, -1 where a coder did not code the unit.

    Observed agreement uses units with two or more ratings; the chance terms
    of Fleiss' kappa and AC1 use every unit with a rating (Gwet's generalised
    formulas, see `_agreement_stats`). AC1 spreads chance over
    `chance_categories` (default `n_categories`): pass the codebook's count
    for the axis when the codes index only the categories seen.

    Intervals resample the rated units (episodes) with replacement, B times,
    in seeded blocks. At perfect or near-perfect agreement the percentile
    interval degenerates (resamples without a disagreement pile up at 1), so
    the statistic instead gets a one-sided lower bound (ONE_SIDED_METHOD): the
    Clopper-Pearson upper bound on the share of disagreeing units, carried
    into the statistic with its chance term held at the observed value.
    """
    codes = _codes(codes, "codes")
    if codes.ndim != 2:
        raise ValueError("codes must be a units x coders matrix")
    Q = _count(n_categories, "n_categories")
    Qc = Q if chance_categories is None else _count(chance_categories, "chance_categories")
    if Qc < Q:
        raise ValueError("chance_categories must be at least n_categories")
    B, level = _count(B, "B"), _level(level)
    if codes.size and codes.max() >= Q:
        raise ValueError("codes hold a code out of range (at least n_categories)")
    m_all = (codes >= 0).sum(axis=1)
    rated = m_all >= 1
    pairable = m_all[rated] >= 2
    U = int(pairable.sum())
    if U < 2:
        none = Estimate(None, reason="fewer than 2 episodes coded by two or more coders")
        return AxisAgreement(
            U, int(m_all[m_all >= 2].sum()), none, none, none, none, (), _frozen(np.full(Q, -1.0)),
            _frozen(np.zeros(Q, dtype=np.int64)), False, none.reason, int(rated.sum()), Qc,
        )  # fmt: skip
    sub = codes[rated]
    N = _unit_counts(sub, Q)
    U1, R = sub.shape
    pair_data = {}
    for i, j in itertools.combinations(range(R), 2):
        both = (sub[:, i] >= 0) & (sub[:, j] >= 0)
        if both.any():
            a, b = sub[both, i], sub[both, j]
            pair_data[(i, j)] = (both, (a == b).astype(float), _onehot(a, Q), _onehot(b, Q), a, b)

    ones = np.ones((1, U1))
    rows = {k: [v] for k, v in _agreement_stats(ones, N, pairable, Qc).items()}
    pair_rows = {p: {k: [v] for k, v in _pair_stats(ones[:, d[0]], *d[1:4]).items()} for p, d in pair_data.items()}
    for Wt in _weight_chunks(U1, B, seed, stream=7):
        for k, v in _agreement_stats(Wt, N, pairable, Qc).items():
            rows[k].append(v)
        for p, d in pair_data.items():
            for k, v in _pair_stats(Wt[:, d[0]], *d[1:4]).items():
                pair_rows[p][k].append(v)
    st = {k: np.concatenate(v) for k, v in rows.items()}

    Np = N[pairable]
    m = Np.sum(axis=1)
    dis = 1 - ((Np**2).sum(axis=1) - m) / (m * (m - 1))  # share of disagreeing pairs per unit
    D = int((dis > 0).sum())
    # Worst case for the unseen disagreements: as strong as the ones seen (complete ones when none were seen).
    po_low = 1 - one_sided_disagreement(D, U, level=level) * (float(dis[dis > 0].mean()) if D else 1.0)
    pe_f, pe_g, n, de = (float(st[k][0]) for k in ("pe_f", "pe_g", "n", "de"))
    bounds = {
        "percent": po_low,
        "fleiss": (po_low - pe_f) / (1 - pe_f) if pe_f < 1 - 1e-12 else None,
        "ac1": (po_low - pe_g) / (1 - pe_g) if pe_g < 1 - 1e-12 else None,
        # alpha = 1 - (n - 1) D_o / D_e with D_o = sum_u m_u d_u, about n (1 - p_a) (exact for equal m_u).
        "alpha": 1 - (n - 1) * n * (1 - po_low) / de if de > 0 else None,
    }

    pairs = []
    for (i, j), d in pair_data.items():
        ps = {k: np.concatenate(v) for k, v in pair_rows[(i, j)].items()}
        a, b = d[4], d[5]
        d_pair = int((a != b).sum())
        p_bound = 1 - one_sided_disagreement(d_pair, int(a.size), level=level)
        pe = float(ps["pe"][0])
        k_bound = (p_bound - pe) / (1 - pe) if pe < 1 - 1e-12 else None
        pairs.append(
            PairAgreement(
                i,
                j,
                int(a.size),
                _estimate(ps["percent"], level, "no episodes coded by both", "no episode coded by both", p_bound),
                _estimate(ps["kappa"], level, _ONE_PAIR_CATEGORY, _ONE_PAIR_CATEGORY_RESAMPLE, k_bound),
                _frozen(np.bincount(a * Q + b, minlength=Q * Q).reshape(Q, Q)),
                d_pair,
            )
        )
    # Specific agreement per category: agreeing pair-ends over all pair-ends that use it.
    agreeing = (Np * (Np - 1) / (m - 1)[:, None]).sum(axis=0)
    uses = Np.sum(axis=0)
    specific = np.where(uses > 0, np.divide(agreeing, uses, out=np.zeros(Q), where=uses > 0), -1.0)
    return AxisAgreement(
        n_units=U,
        n_ratings=int(m.sum()),
        percent=_estimate(st["percent"], level, "undefined", _NO_PAIRS, bounds["percent"]),
        fleiss_kappa=_estimate(
            st["fleiss"], level, "all ratings in one category: kappa is undefined", _ONE_CATEGORY, bounds["fleiss"]
        ),
        krippendorff_alpha=_estimate(
            st["alpha"], level, "all ratings in one category: alpha is undefined", _ONE_CATEGORY, bounds["alpha"]
        ),
        gwet_ac1=_estimate(st["ac1"], level, "undefined for a single category", _NO_PAIRS, bounds["ac1"]),
        pairs=tuple(pairs),
        specific=_frozen(specific),
        specific_n=_frozen(uses.astype(np.int64)),
        enough=True,
        n_rated=U1,
        chance_categories=Qc,
        disagreeing=D,
    )


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
