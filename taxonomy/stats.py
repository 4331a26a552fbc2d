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

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr, ndtri

BLOCK = 128  # replicates per seeded block; part of the stream definition, never change silently
FLOAT32_EXACT = 2**24  # integer sums below this are exact in float32
LIGHT_CELLS = 1 << 21  # index draws held in memory at once, per thread
HEAVY_MULTIPLICITY = 4  # identical clusters at least this many times are drawn by multinomial

ProgressFn = Callable[[int, int], None]


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
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
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
    values = np.asarray(values, dtype=np.int64)
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
    cells = np.asarray(cells, dtype=np.int64)
    names_arr = np.asarray(clusters, dtype=object).astype(str) if len(cells) else np.array([], dtype=str)
    if cells.size and (cells.min() < 0 or cells.max() >= n_cells):
        raise ValueError("cell index out of range")
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
    alpha = 1 - level
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


@dataclass(frozen=True, eq=False)
class CellBootstrap:
    """Per-cell proportion estimates and intervals for one kind (flattened K cells)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    enough: bool
    reason: str = ""
    method: str = "percentile"


@dataclass(frozen=True, eq=False)
class DiffBootstrap:
    """Per-cell differences p_a - p_b with intervals."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    enough: bool
    reason: str = ""
    method: str = "percentile"

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


def cell_intervals(design: ClusterDesign, reps: np.ndarray, *, level: float = 0.95, bca: bool = False) -> CellBootstrap:
    """Intervals for every cell proportion of one kind from its replicate counts."""
    K = design.n_cells
    ok, reason = design_enough(design)
    est = design.totals / design.n if design.n else np.zeros(K)
    if not ok:
        z = np.zeros(K)
        return CellBootstrap(_frozen(est), _frozen(z), _frozen(z.copy()), False, reason)
    props = replicate_proportions(reps)
    if bca:
        lo, hi = _bca(props, est, _jackknife_props(design), level)
    else:
        lo, hi = _percentile(props, level)
    return CellBootstrap(_frozen(est), _frozen(lo), _frozen(hi), True, "", "bca" if bca else "percentile")


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
    K = a.n_cells
    ok_a, why_a = design_enough(a)
    ok_b, why_b = design_enough(b)
    est_a = a.totals / a.n if a.n else np.zeros(K)
    est_b = b.totals / b.n if b.n else np.zeros(K)
    est = est_a - est_b
    if not (ok_a and ok_b):
        reason = "; ".join(f"{side}: {why}" for side, why in ((names[0], why_a), (names[1], why_b)) if why)
        z = np.zeros(K)
        return DiffBootstrap(_frozen(est), _frozen(z), _frozen(z.copy()), False, reason)
    diffs = replicate_proportions(reps_a) - replicate_proportions(reps_b)
    if bca:
        jack = np.vstack([_jackknife_props(a) - est_b, est_a - _jackknife_props(b)])
        lo, hi = _bca(diffs, est, jack, level)
    else:
        lo, hi = _percentile(diffs, level)
    return DiffBootstrap(_frozen(est), _frozen(lo), _frozen(hi), True, "", "bca" if bca else "percentile")


def bootstrap_diff_cell(
    a: ClusterDesign, b: ClusterDesign, k: int, *, B: int, seed: int, level: float = 0.95, stream: int = 0
) -> Interval | None:
    """A percentile interval for one cell's p_a - p_b, or None without enough data."""
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
    elif da.n and db.n:
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
    else:
        checks.append(
            SensitivityCheck(
                "drop_largest_cluster", _CHECKS[2][1], None, None, None, None, None, dropped, False, "nothing left"
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


@dataclass(frozen=True)
class Estimate:
    """A statistic with a bootstrap interval; value None means not defined here (see reason)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    reason: str = ""


@dataclass(frozen=True, eq=False)
class PairAgreement:
    coder_a: int
    coder_b: int
    n: int  # units both coded
    percent: Estimate
    kappa: Estimate
    confusion: np.ndarray  # Q x Q, rows coder_a


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


def _agreement_stats(Wt: np.ndarray, N: np.ndarray, Q: int) -> dict[str, np.ndarray]:
    """Percent agreement, Fleiss' kappa, Krippendorff's alpha and Gwet's AC1 for each weight row.

    N holds only pairable units (m_u >= 2), so every statistic is a ratio of
    weighted sums over units, and one matrix product evaluates all replicates.
    """
    m = N.sum(axis=1)
    sq = (N**2).sum(axis=1)
    agree_pairs = (sq - m) / (m * (m - 1))  # share of agreeing ordered pairs in each unit
    wsum = Wt.sum(axis=1)
    po = (Wt @ agree_pairs) / wsum

    nc = Wt @ N  # category totals over ratings
    n = nc.sum(axis=1)
    # Fleiss (variable raters): chance from pooled category shares.
    pj = nc / n[:, None]
    pe_f = (pj**2).sum(axis=1)
    # Krippendorff (nominal): observed and expected disagreement on the coincidence matrix.
    do = Wt @ ((m**2 - sq) / (m - 1))
    de = n**2 - (nc**2).sum(axis=1)
    # Gwet's AC1: category prevalence averaged over units, chance spread over Q categories.
    pi = (Wt @ (N / m[:, None])) / wsum[:, None]
    pe_g = (pi * (1 - pi)).sum(axis=1) / (Q - 1) if Q > 1 else np.ones_like(po)

    with np.errstate(divide="ignore", invalid="ignore"):
        fleiss = np.where(pe_f < 1 - 1e-12, (po - pe_f) / (1 - pe_f), np.nan)
        alpha = np.where(de > 0, 1 - (n - 1) * do / de, np.nan)
        ac1 = np.where(pe_g < 1 - 1e-12, (po - pe_g) / (1 - pe_g), np.nan)
    return {"percent": po, "fleiss": fleiss, "alpha": alpha, "ac1": ac1}


def _pair_stats(Wt: np.ndarray, eq: np.ndarray, onehot_a: np.ndarray, onehot_b: np.ndarray) -> dict[str, np.ndarray]:
    """Observed agreement and Cohen's kappa of one coder pair, for each weight row."""
    tot = Wt.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (Wt @ eq) / tot
        pe = ((Wt @ onehot_a) * (Wt @ onehot_b)).sum(axis=1) / tot**2
        kappa = np.where((tot > 0) & (pe < 1 - 1e-12), (po - pe) / (1 - pe), np.nan)
    return {"percent": po, "kappa": kappa}


def _estimate(values: np.ndarray, level: float, undefined: str) -> Estimate:
    """Sample value (row 0) with a percentile interval over the defined replicates."""
    v = values[0]
    if not np.isfinite(v):
        return Estimate(None, reason=undefined)
    reps = values[1:]
    reps = reps[np.isfinite(reps)]
    if reps.size < 2:
        return Estimate(float(v), reason="too few defined replicates for an interval")
    lo, hi = np.quantile(reps, [(1 - level) / 2, 1 - (1 - level) / 2])
    return Estimate(float(v), float(lo), float(hi))


def _onehot(codes: np.ndarray, Q: int) -> np.ndarray:
    out = np.zeros((codes.size, Q))
    out[np.arange(codes.size), codes] = 1
    return out


def agreement(
    codes: np.ndarray, n_categories: int, *, B: int = 1000, seed: int = 0, level: float = 0.95
) -> AxisAgreement:
    """Agreement on one axis. `codes` is units x coders, -1 where a coder did not code the unit.

    Only units with two or more ratings count. Intervals resample those units
    (episodes) with replacement, B times, in seeded blocks.
    """
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2:
        raise ValueError("codes must be a units x coders matrix")
    Q = n_categories
    if codes.size and codes.max() >= Q:
        raise ValueError("code out of range")
    m_all = (codes >= 0).sum(axis=1)
    pairable = m_all >= 2
    U = int(pairable.sum())
    if U < 2:
        none = Estimate(None, reason="fewer than 2 episodes coded by two or more coders")
        return AxisAgreement(
            U, int(m_all[pairable].sum()), none, none, none, none, (), _frozen(np.full(Q, -1.0)),
            _frozen(np.zeros(Q, dtype=np.int64)), False, none.reason,
        )  # fmt: skip
    sub = codes[pairable]
    N = _unit_counts(sub, Q)
    R = codes.shape[1]
    pair_ids = [(i, j) for i in range(R) for j in range(i + 1, R)]
    pair_data = {}
    for i, j in pair_ids:
        both = (sub[:, i] >= 0) & (sub[:, j] >= 0)
        if both.any():
            a, b = sub[both, i], sub[both, j]
            pair_data[(i, j)] = (both, (a == b).astype(float), _onehot(a, Q), _onehot(b, Q), a, b)

    ones = np.ones((1, U))
    rows = {k: [v] for k, v in _agreement_stats(ones, N, Q).items()}
    pair_rows = {p: {k: [v] for k, v in _pair_stats(ones[:, d[0]], *d[1:4]).items()} for p, d in pair_data.items()}
    for Wt in _weight_chunks(U, B, seed, stream=7):
        for k, v in _agreement_stats(Wt, N, Q).items():
            rows[k].append(v)
        for p, d in pair_data.items():
            for k, v in _pair_stats(Wt[:, d[0]], *d[1:4]).items():
                pair_rows[p][k].append(v)
    stats = {k: np.concatenate(v) for k, v in rows.items()}

    pairs = []
    for (i, j), d in pair_data.items():
        ps = {k: np.concatenate(v) for k, v in pair_rows[(i, j)].items()}
        a, b = d[4], d[5]
        pairs.append(
            PairAgreement(
                i,
                j,
                int(a.size),
                _estimate(ps["percent"], level, "no episodes coded by both"),
                _estimate(ps["kappa"], level, "both coders used one and the same category: kappa is undefined"),
                _frozen(np.bincount(a * Q + b, minlength=Q * Q).reshape(Q, Q)),
            )
        )
    # Specific agreement per category: agreeing pair-ends over all pair-ends that use it.
    m = N.sum(axis=1)
    agreeing = (N * (N - 1) / (m - 1)[:, None]).sum(axis=0)
    uses = N.sum(axis=0)
    specific = np.where(uses > 0, np.divide(agreeing, uses, out=np.zeros(Q), where=uses > 0), -1.0)
    return AxisAgreement(
        n_units=U,
        n_ratings=int(m.sum()),
        percent=_estimate(stats["percent"], level, "undefined"),
        fleiss_kappa=_estimate(stats["fleiss"], level, "all ratings in one category: kappa is undefined"),
        krippendorff_alpha=_estimate(stats["alpha"], level, "all ratings in one category: alpha is undefined"),
        gwet_ac1=_estimate(stats["ac1"], level, "undefined for a single category"),
        pairs=tuple(pairs),
        specific=_frozen(specific),
        specific_n=_frozen(uses.astype(np.int64)),
        enough=True,
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
