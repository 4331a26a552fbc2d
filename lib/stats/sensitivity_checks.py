"""Sensitivity checks for one cell and contrast: does the conclusion survive dropping, capping or re-weighting
clusters?"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lib.stats.bootstrap import (
    BLOCK,
    Interval,
    _block_rng,
    _percentile,
    design_enough,
    replicate_blocks,
    replicate_proportions,
)
from lib.stats.designs import ClusterDesign, _frozen, design_without, record_design
from lib.stats.intervals import bootstrap_diff_cell

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
    keep = np.sort(order[rank < cap])  # episodes stay sorted by (cluster, cell)
    cells, g = design.cells[keep], design.episode_cluster[keep]
    # The kept clusters in the design's own order, renumbered: no cluster names are sorted again. Replicates
    # do not depend on the order of the clusters (identical rows are grouped by content), only on the rows.
    present = np.bincount(g, minlength=design.n_clusters) > 0
    remap = np.cumsum(present) - 1
    g = remap[g]
    G, K = int(present.sum()), design.n_cells
    counts = np.bincount(g * K + cells, minlength=G * K).reshape(G, K)
    return ClusterDesign(
        counts=_frozen(counts),
        names=tuple(np.asarray(design.names, dtype=object)[present].tolist()),
        cells=_frozen(cells),
        episode_cluster=_frozen(g),
    )


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
    if cap < 1 or subsamples < 1:
        raise ValueError("cap and subsamples must be at least 1")
    if not (design_enough(a)[0] and design_enough(b)[0]):
        reason = design_enough(a)[1] or design_enough(b)[1]
        return [SensitivityCheck(n, d, None, None, None, None, None, enough=False, reason=reason) for n, d in _CHECKS]
    base = baseline or bootstrap_diff_cell(a, b, k, B=B, seed=seed, level=level)
    run = {"B": B, "seed": seed, "level": level}
    return [
        _leave_one_cluster_out(a, b, k, base, **run),
        _cluster_cap(a, b, k, base, cap=cap, subsamples=subsamples, **run),
        _drop_largest_cluster(a, b, k, base, **run),
        _record_bootstrap(a, b, k, base, **run),
    ]


def _loo_cell(design: ClusterDesign, k: int) -> np.ndarray:
    """Cell k's share without each cluster in turn: (total - own) / (n - size), 0 where nothing is left.

    The same numbers as column k of the full jackknife, without building its G x K matrix."""
    rest = design.totals[k] - design.counts[:, k]
    n_rest = design.n - design.sizes
    return np.divide(rest, n_rest, out=np.zeros(rest.shape), where=n_rest > 0)


def _leave_one_cluster_out(
    a: ClusterDesign, b: ClusterDesign, k: int, base: Interval, *, B: int, seed: int, level: float
) -> SensitivityCheck:
    """Leave one cluster out, from either kind: the range of the contrast and the cluster that moves it most."""
    pa, pb = a.totals[k] / a.n, b.totals[k] / b.n
    # Each cluster's estimate without it, by subtraction from the totals (one pass over the counts).
    loo_a = _loo_cell(a, k) - pb
    loo_b = pa - _loo_cell(b, k)
    # A kind with one cluster left after removal has no estimate; keep only defined ones.
    keep_a, keep_b = np.flatnonzero(a.n - a.sizes > 0), np.flatnonzero(b.n - b.sizes > 0)
    loo = np.concatenate([loo_a[keep_a], loo_b[keep_b]])
    worst = int(np.argmax(np.abs(loo - base.estimate)))
    side, row = ("a", int(keep_a[worst])) if worst < keep_a.size else ("b", int(keep_b[worst - keep_a.size]))
    name = (a if side == "a" else b).names[row]
    drop_a = design_without(a, [row]) if side == "a" else a
    drop_b = design_without(b, [row]) if side == "b" else b
    iv = bootstrap_diff_cell(drop_a, drop_b, k, B=B, seed=seed, level=level, stream=1)
    return SensitivityCheck(
        "leave_one_cluster_out",
        _CHECKS[0][1],
        float(loo[worst]),
        iv.low if iv else None,
        iv.high if iv else None,
        bool(np.all(np.sign(loo) == _sign(base.estimate))),
        iv.excludes_zero if iv else None,
        {
            "min": float(loo.min()),
            "max": float(loo.max()),
            "most_influential": {"side": side, "cluster": name, "shift": float(loo[worst] - base.estimate)},
            "n_clusters": len(loo),
        },
    )


def _cluster_cap(
    a: ClusterDesign,
    b: ClusterDesign,
    k: int,
    base: Interval,
    *,
    cap: int,
    subsamples: int,
    B: int,
    seed: int,
    level: float,
) -> SensitivityCheck:
    """Cap each cluster at `cap` episodes, averaged over random subsamples.

    Both designs hold episodes and cap >= 1 (checked by `sensitivity`), so every subsample holds episodes and
    has an estimate. Its replicates need two clusters on each side: a design given by counts alone
    (`counts_design`) can carry clusters without episodes, which a subsample drops; then the check has an
    estimate but no interval."""
    rng = _block_rng(seed, 0, stream=2)
    ests, reps = [], []
    b_each = max(BLOCK, -(-B // subsamples))
    for s in range(subsamples):
        ca, cb = _capped(a, cap, rng), _capped(b, cap, rng)
        ests.append(ca.totals[k] / ca.n - cb.totals[k] / cb.n)
        if design_enough(ca)[0] and design_enough(cb)[0]:
            ra, rb = replicate_blocks([ca, cb], B=b_each, seed=seed, stream=100 + s, threads=1)
            reps.append(replicate_proportions(ra)[:, k] - replicate_proportions(rb)[:, k])
    est = float(np.mean(ests))
    lo, hi = (float(x[0]) for x in _percentile(np.concatenate(reps)[:, None], level)) if reps else (None, None)
    return SensitivityCheck(
        "cluster_cap",
        _CHECKS[1][1].format(cap=cap),
        est,
        lo,
        hi,
        _sign(est) == _sign(base.estimate),
        (lo > 0 or hi < 0) if lo is not None else None,
        {"cap": cap, "subsamples": len(ests), "min": float(np.min(ests)), "max": float(np.max(ests))},
    )


def _drop_largest_cluster(
    a: ClusterDesign, b: ClusterDesign, k: int, base: Interval, *, B: int, seed: int, level: float
) -> SensitivityCheck:
    """Drop the largest cluster of each kind (kinds whose clusters all hold one episode keep theirs)."""
    la, lb = int(np.argmax(a.sizes)), int(np.argmax(b.sizes))
    # A cluster of one episode is kept, and so is one that holds every episode of its kind (a design given by
    # counts alone can carry empty clusters): without it the kind would have no estimate.
    drop_a = 1 < a.sizes[la] < a.n
    drop_b = 1 < b.sizes[lb] < b.n
    da = design_without(a, [la]) if drop_a else a
    db = design_without(b, [lb]) if drop_b else b
    dropped = {
        "a": a.names[la] if drop_a else None,
        "a_size": int(a.sizes[la]) if drop_a else 0,
        "b": b.names[lb] if drop_b else None,
        "b_size": int(b.sizes[lb]) if drop_b else 0,
    }
    if not (drop_a or drop_b):
        return SensitivityCheck(
            "drop_largest_cluster", _CHECKS[2][1], None, None, None, None, None, dropped, False,
            "no cluster holds more than one episode",
        )  # fmt: skip
    # Both kinds keep episodes: a dropped cluster never held all of its kind's.
    iv = bootstrap_diff_cell(da, db, k, B=B, seed=seed, level=level, stream=3)
    est = float(da.totals[k] / da.n - db.totals[k] / db.n)
    return SensitivityCheck(
        "drop_largest_cluster",
        _CHECKS[2][1],
        est,
        iv.low if iv else None,
        iv.high if iv else None,
        _sign(est) == _sign(base.estimate),
        iv.excludes_zero if iv else None,
        dropped,
    )


def _record_bootstrap(
    a: ClusterDesign, b: ClusterDesign, k: int, base: Interval, *, B: int, seed: int, level: float
) -> SensitivityCheck:
    """Record-level bootstrap: what ignoring the clustering would claim."""
    iv = bootstrap_diff_cell(record_design(a), record_design(b), k, B=B, seed=seed, level=level, stream=4)
    width = base.high - base.low
    return SensitivityCheck(
        "record_bootstrap",
        _CHECKS[3][1],
        iv.estimate,
        iv.low,
        iv.high,
        _sign(iv.estimate) == _sign(base.estimate),
        iv.excludes_zero,
        {
            "cluster_width": float(width),
            "record_width": float(iv.high - iv.low),
            "widening": float(width / (iv.high - iv.low)) if iv.high > iv.low else None,
        },
    )


_CHECKS = (
    ("leave_one_cluster_out", "Leave one cluster out: the range of the contrast, and the cluster that moves it most"),
    ("cluster_cap", "At most {cap} episodes per cluster, averaged over random subsamples"),
    ("drop_largest_cluster", "Without the largest cluster of each kind (clusters of one episode are kept)"),
    ("record_bootstrap", "Ordinary record-level bootstrap (ignores clustering)"),
)
