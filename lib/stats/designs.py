"""Input checks, cell matrices, distributions and cluster designs: what every estimate is computed from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

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

    # Sizes and totals are summed once per design and kept (read-only, like the counts): a loop over
    # clusters that asked for them anew summed the whole G x K matrix at every step (issue 31).
    @cached_property
    def sizes(self) -> np.ndarray:
        return _frozen(self.counts.sum(axis=1))

    @cached_property
    def totals(self) -> np.ndarray:
        return _frozen(self.counts.sum(axis=0))

    @cached_property
    def n(self) -> int:
        return int(self.sizes.sum())


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
