"""Seeded cluster-bootstrap replicates in fixed blocks (see lib.stats for the stream definition), and the
bootstrap summaries of cells and of differences between kinds."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from lib.stats.designs import ClusterDesign, _count, _level

BLOCK = 128  # replicates per seeded block; part of the stream definition, never change silently
FLOAT32_EXACT = 2**24  # integer sums below this are exact in float32
LIGHT_CELLS = 1 << 21  # index draws held in memory at once, per thread
HEAVY_MULTIPLICITY = 4  # identical clusters at least this many times are drawn by multinomial
MIN_CLUSTERS = 5  # an interval resting on fewer clusters with records is flagged
ProgressFn = Callable[[int, int], None]


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
    from scipy.special import ndtr, ndtri  # on first use: 25 MB a web process need not load

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


CELL_METHODS = ("beta_cr2_bm", "svyciprop_beta", "jeffreys_deff", "wilson_deff", "percentile", "bca")
DEFAULT_CELL_METHOD = "beta_cr2_bm"
CELL_METHOD_NAMES = {
    "beta_cr2_bm": "Korn-Graubard beta interval, cell by cell: CR2 cluster variance, Bell-McCaffrey degrees of "
    "freedom under the cell's intra-cluster correlation (an upper limit's part independent of the error on at most "
    "effective clusters - 1), design "
    "effect at most full clustering's; an empty cell gets the exact binomial (Clopper-Pearson) bound on all the "
    "kind's records",
    "svyciprop_beta": 'R survey::svyciprop(method = "beta"): linearised variance, clusters - 1 degrees of freedom',
    "jeffreys_deff": "Jeffreys on the design-effect effective sample size",
    "wilson_deff": "Wilson on the design-effect effective sample size",
    "percentile": "cluster bootstrap, percentile",
    "bca": "cluster bootstrap, BCa",
}
# Short labels for a method picker; CELL_METHOD_NAMES says in full what each method is.
CELL_METHOD_LABELS = {
    "beta_cr2_bm": "Korn-Graubard beta, cell by cell (CR2 variance, Bell-McCaffrey df)",
    "svyciprop_beta": 'R svyciprop(method = "beta")',
    "jeffreys_deff": "Jeffreys, design-effect size",
    "wilson_deff": "Wilson, design-effect size",
    "percentile": "cluster bootstrap, percentile",
    "bca": "cluster bootstrap, BCa",
}
# Names a link, a script or a stored job may still carry: korn_graubard was the default before the cell-wise rule.
CELL_METHOD_ALIASES = {"korn_graubard": DEFAULT_CELL_METHOD}
BOOTSTRAP_METHODS = ("percentile", "bca")
BETA_METHODS = ("beta_cr2_bm", "svyciprop_beta")


def canonical_method(method: str) -> str:
    """The cell method a name stands for (an alias gives its method); ValueError naming the methods otherwise."""
    method = CELL_METHOD_ALIASES.get(method, method)
    if method not in CELL_METHODS:
        raise ValueError(f"method must be one of {', '.join(CELL_METHODS)}")
    return method


@dataclass(frozen=True, eq=False)
class CellBootstrap:
    """Per-cell proportion estimates and intervals for one kind (flattened K cells).

    `clusters_with_records` counts, per cell, the clusters holding at least one
    of its episodes, and `effective_clusters` how many clusters' worth they are
    (Kish's (sum y_g)^2 / sum y_g^2: 3 for three clusters with 5 records each,
    barely above 1 when one of them holds 50 records and two hold 1). An
    interval resting on fewer than MIN_CLUSTERS effective clusters is flagged
    (`few_clusters`); as the effective number never exceeds the count, that
    includes every cell with records in fewer than MIN_CLUSTERS clusters.
    `n_eff` is the effective sample size the analytic methods use, `df` and
    `df_upper` the degrees of freedom of the lower and upper limits (see
    lib.stats.intervals.effective_sizes).
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    enough: bool
    reason: str = ""
    method: str = "percentile"
    clusters_with_records: np.ndarray | None = None
    n_eff: np.ndarray | None = None
    df: np.ndarray | None = None
    df_upper: np.ndarray | None = None
    effective_clusters: np.ndarray | None = None

    @property
    def few_clusters(self) -> np.ndarray:
        few = self.clusters_with_records < MIN_CLUSTERS
        return few if self.effective_clusters is None else few | (self.effective_clusters < MIN_CLUSTERS)


@dataclass(frozen=True, eq=False)
class DiffBootstrap:
    """Per-cell differences p_a - p_b with intervals; `few_clusters` when either side rests on fewer than
    MIN_CLUSTERS effective clusters."""

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
