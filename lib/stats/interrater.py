"""Agreement between coders: observed agreement, Krippendorff's alpha and pairwise kappa, with bootstrap intervals
over episodes."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from lib.stats.bootstrap import BLOCK, _block_rng, n_blocks
from lib.stats.designs import _codes, _count, _frozen, _level

UNDEFINED_WARN = 0.05  # above this share of undefined bootstrap replicates an agreement interval says so


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
    # The confusion matrix as its non-zero cells (category of coder_a, of coder_b, count), sorted by the pair
    # of categories: whole labels can number thousands, and a dense Q x Q matrix grows with their square.
    cells: tuple[np.ndarray, np.ndarray, np.ndarray]
    disagreeing: int = 0  # units both coded on which they differ
    categories: int = 0  # Q

    @property
    def confusion(self) -> np.ndarray:
        """The dense Q x Q confusion matrix, rows coder_a (built on request: Q^2 cells)."""
        m = np.zeros((self.categories, self.categories), dtype=np.int64)
        m[self.cells[0], self.cells[1]] = self.cells[2]
        return m


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


@dataclass(frozen=True, eq=False)
class _Units:
    """Each rated unit's ratings in compact form: one entry per (unit, category) the unit received, never a
    units x categories matrix (whole labels number thousands: dense, that was 5 GB at 100,000 units).

    Entries are sorted by unit, then category; `category` indexes `used`, the codes that occur. `m` is each
    unit's number of ratings.
    """

    unit: np.ndarray
    category: np.ndarray
    count: np.ndarray
    used: np.ndarray
    m: np.ndarray


def _unit_counts(codes: np.ndarray) -> _Units:
    """How many coders gave each category to each unit, as sorted (unit, category, count) entries."""
    ok = codes >= 0
    rows = np.nonzero(ok)[0]
    used, category = np.unique(codes[ok], return_inverse=True)
    L = max(used.size, 1)
    key, count = np.unique(rows * L + category, return_counts=True)
    m = np.bincount(rows, minlength=codes.shape[0]).astype(np.float64)
    return _Units(key // L, key % L, count.astype(np.float64), used, m)


def _sparse(values: np.ndarray, rows: np.ndarray, units: np.ndarray, shape: tuple[int, int]):
    """A rows x units sparse matrix stored by unit (CSC): its product with the units x replicates weights
    reads each unit's weights once, in order, and adds them into the few rows the unit has entries in."""
    from scipy.sparse import csc_array  # on first use, as scipy.special below

    return csc_array((values, (rows, units)), shape=shape)


def _weight_chunks(U: int, B: int, seed: int, stream: int, max_cells: int = 1 << 21):
    """B x U bootstrap weights over units, in chunks of at most max(1, max_cells // U) rows to bound memory.

    Block i's rows are drawn from its own seeded generator (`_block_rng`); a chunk may end inside a block,
    whose next rows continue the same generator in the next chunk (numpy draws the same numbers in pieces as
    in one call).
    """
    rows = max(1, max_cells // max(U, 1))
    done, at, chunk = 0, 0, None
    for i in range(n_blocks(B)):
        rng, left = _block_rng(seed, i, stream), min(BLOCK, B - i * BLOCK)
        while left:
            if chunk is None:
                chunk, at = np.empty((min(rows, B - done), U)), 0
            k = min(left, chunk.shape[0] - at)
            for row, idx in enumerate(rng.integers(0, U, size=(k, U), dtype=np.int64), start=at):
                chunk[row] = np.bincount(idx, minlength=U)
            at, left, done = at + k, left - k, done + k
            if at == chunk.shape[0]:
                yield chunk
                chunk = None


@dataclass(frozen=True, eq=False)
class _Overall:
    """What the overall statistics sum over the rated units, each weight row costing O(units + entries).

    `vectors` (units x 5, zero where a unit is not pairable but for the first column): 1; 1 if pairable;
    its share of agreeing ordered rater pairs; its pairs of differing ratings over m - 1 (Krippendorff's
    D_o); m. `by_category` (2 L x units, sparse): the ratings of pairable units in each of the L categories
    used, then each rated unit's share of its ratings in them.
    """

    vectors: np.ndarray
    by_category: object
    L: int


def _overall(units: _Units, pairable: np.ndarray) -> _Overall:
    U1, L = units.m.size, units.used.size
    sq = np.bincount(units.unit, weights=units.count**2, minlength=U1)
    p, m = pairable, units.m[pairable]
    vectors = np.zeros((U1, 5))
    vectors[:, 0], vectors[:, 1] = 1, pairable
    vectors[p, 2] = (sq[p] - m) / (m * (m - 1))
    vectors[p, 3] = (m**2 - sq[p]) / (m - 1)
    vectors[p, 4] = m
    counted = pairable[units.unit]
    values = np.concatenate([units.count[counted], units.count / units.m[units.unit]])
    rows = np.concatenate([units.category[counted], units.category + L])
    return _Overall(vectors, _sparse(values, rows, np.concatenate([units.unit[counted], units.unit]), (2 * L, U1)), L)


def _agreement_stats(Wt: np.ndarray, X: np.ndarray, o: _Overall, Qc: int) -> dict[str, np.ndarray]:
    """Percent agreement, Fleiss' kappa, Krippendorff's alpha and Gwet's AC1 for each weight row of Wt
    (replicates x units; X is its transpose, C-contiguous).

    The statistics are over every unit with at least one rating; those with
    two or more are pairable. These are Gwet's generalised formulas (Handbook
    of Inter-Rater Reliability, 4th ed., ch. 2 and 5; the irrCAC package):
    observed agreement p_a averages, over pairable units, the share of
    agreeing rater pairs; the chance terms use pi_k, the mean over *all* rated
    units of the unit's share of ratings in k (a unit coded once still tells
    which categories coders use). Fleiss: p_e = sum pi_k^2. AC1: p_e =
    sum pi_k (1 - pi_k) / (Qc - 1), Qc being the codebook's categories for the
    axis. Krippendorff's alpha uses pairable units only (its coincidence
    matrix). Every statistic is a ratio of weighted sums over units: of
    per-unit values (one matrix product) and of per-category totals (one
    sparse product), so a weight row costs O(units + ratings) whatever the
    number of categories.
    """
    tot, wsum, agree, do, n = (Wt @ o.vectors).T
    y = o.by_category @ X
    nc, share = y[: o.L], y[o.L :]  # category totals over ratings of pairable units; sums of shares
    de = n**2 - (nc**2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        po = agree / wsum
        pi = share / tot
        pe_f = (pi**2).sum(axis=0)
        pe_g = (pi * (1 - pi)).sum(axis=0) / (Qc - 1) if Qc > 1 else np.ones_like(po)
        fleiss = np.where(pe_f < 1 - 1e-12, (po - pe_f) / (1 - pe_f), np.nan)
        alpha = np.where(de > 0, 1 - (n - 1) * do / de, np.nan)
        ac1 = np.where(pe_g < 1 - 1e-12, (po - pe_g) / (1 - pe_g), np.nan)
    return {"percent": po, "fleiss": fleiss, "alpha": alpha, "ac1": ac1, "pe_f": pe_f, "pe_g": pe_g, "n": n, "de": de}


@dataclass(frozen=True, eq=False)
class _Pair:
    """One pair of coders who share units, as a sparse (2 + 2 S) x units matrix: where both coded, where
    they agreed, then each coder's codes one-hot over the S categories both of them used; the codes."""

    matrix: object
    S: int
    a: np.ndarray
    b: np.ndarray


def _pair(sub: np.ndarray, i: int, j: int, at: np.ndarray) -> _Pair:
    a, b = sub[at, i], sub[at, j]
    shared = np.intersect1d(a, b)  # p_e sums over these only: a category one coder never used adds 0
    rows, units = [np.zeros(at.size, dtype=np.int64), np.ones(at.size, dtype=np.int64)], [at, at]
    values = [np.ones(at.size), (a == b).astype(np.float64)]
    for first, codes in ((2, a), (2 + shared.size, b)):
        k = np.searchsorted(shared, codes)
        hit = k < shared.size
        hit[hit] = shared[k[hit]] == codes[hit]
        rows.append(first + k[hit])
        units.append(at[hit])
        values.append(np.ones(int(hit.sum())))
    shape = (2 + 2 * shared.size, sub.shape[0])
    return _Pair(_sparse(np.concatenate(values), np.concatenate(rows), np.concatenate(units), shape), shared.size, a, b)


def _pair_stats(X: np.ndarray, pair: _Pair) -> dict[str, np.ndarray]:
    """Observed agreement and Cohen's kappa of one coder pair, for each column of X (units x replicates).

    p_e = sum_k A_k B_k / n^2 over the categories both coders used (a category only one of them used adds 0).
    """
    y = pair.matrix @ X
    tot, agree = y[0], y[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        po = agree / tot
        pe = (y[2 : 2 + pair.S] * y[2 + pair.S :]).sum(axis=0) / tot**2
        kappa = np.where((tot > 0) & (pe < 1 - 1e-12), (po - pe) / (1 - pe), np.nan)
    return {"percent": po, "kappa": kappa, "pe": pe}


def one_sided_disagreement(disagreeing: int, units: int, *, level: float = 0.95) -> float:
    """Clopper-Pearson one-sided upper bound on the share of disagreeing units (exact, never 0)."""
    from scipy.special import betaincinv  # on first use: 25 MB a web process need not load

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
    codes, Q, Qc, B, level = _agreement_inputs(codes, n_categories, chance_categories, B, level)
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
    units, st, pair_data, pair_rows = _statistics(codes[rated], Qc, B=B, seed=seed)
    D, bounds = _one_sided_bounds(st, U, level)
    pairs = _pair_agreements(pair_data, pair_rows, Q, level)
    specific, uses = _specific(units, Q)
    return AxisAgreement(
        n_units=U,
        n_ratings=int(units.m[units.m >= 2].sum()),
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
        n_rated=units.m.size,
        chance_categories=Qc,
        disagreeing=D,
    )


def _agreement_inputs(codes, n_categories, chance_categories, B, level) -> tuple[np.ndarray, int, int, int, float]:
    """agreement()'s arguments checked: the codes matrix, Q, the chance categories, B and the level."""
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
    return codes, Q, Qc, B, level


def _pair_data(sub: np.ndarray) -> dict[tuple[int, int], _Pair]:
    """Each pair of coders who share a unit (see _Pair)."""
    pair_data = {}
    for i, j in itertools.combinations(range(sub.shape[1]), 2):
        at = np.flatnonzero((sub[:, i] >= 0) & (sub[:, j] >= 0))
        if at.size:
            pair_data[(i, j)] = _pair(sub, i, j, at)
    return pair_data


def _statistics(sub: np.ndarray, Qc: int, *, B: int, seed: int) -> tuple[_Units, dict, dict, dict]:
    """The rated units' counts; the overall statistics on the sample (row 0) and on B weighted resamples of the
    units, with each pairable unit's share of agreeing rater pairs (`agree`); each coder pair and its rows."""
    units = _unit_counts(sub)
    U1 = units.m.size
    overall = _overall(units, units.m >= 2)
    pair_data = _pair_data(sub)
    ones = np.ones((1, U1))
    rows = {k: [v] for k, v in _agreement_stats(ones, ones.T, overall, Qc).items()}
    pair_rows = {p: {k: [v] for k, v in _pair_stats(ones.T, d).items()} for p, d in pair_data.items()}
    for Wt in _weight_chunks(U1, B, seed, stream=7):
        X = np.ascontiguousarray(Wt.T)
        for k, v in _agreement_stats(Wt, X, overall, Qc).items():
            rows[k].append(v)
        for p, d in pair_data.items():
            for k, v in _pair_stats(X, d).items():
                pair_rows[p][k].append(v)
    st = {k: np.concatenate(v) for k, v in rows.items()}
    st["agree"] = overall.vectors[units.m >= 2, 2]
    return units, st, pair_data, {p: {k: np.concatenate(v) for k, v in r.items()} for p, r in pair_rows.items()}


def _specific(units: _Units, Q: int) -> tuple[np.ndarray, np.ndarray]:
    """Specific agreement per category (agreeing pair-ends over all pair-ends that use it; -1 where unused) and
    the ratings of pairable units in it."""
    entries = units.m[units.unit] >= 2
    cat, n_uk = units.used[units.category[entries]], units.count[entries]
    agreeing = np.bincount(cat, weights=n_uk * (n_uk - 1) / (units.m[units.unit[entries]] - 1), minlength=Q)
    uses = np.bincount(cat, weights=n_uk, minlength=Q)
    return np.where(uses > 0, np.divide(agreeing, uses, out=np.zeros(Q), where=uses > 0), -1.0), uses


def _one_sided_bounds(st: dict, U: int, level: float) -> tuple[int, dict]:
    """How many units hold a disagreement, and each statistic's one-sided lower bound (ONE_SIDED_METHOD)."""
    dis = 1 - st["agree"]  # share of disagreeing pairs per unit
    D = int((dis > 0).sum())
    # Worst case for the unseen disagreements: as strong as the ones seen (complete ones when none were seen).
    po_low = 1 - one_sided_disagreement(D, U, level=level) * (float(dis[dis > 0].mean()) if D else 1.0)
    pe_f, pe_g, n, de = (float(st[k][0]) for k in ("pe_f", "pe_g", "n", "de"))
    return D, {
        "percent": po_low,
        "fleiss": (po_low - pe_f) / (1 - pe_f) if pe_f < 1 - 1e-12 else None,
        "ac1": (po_low - pe_g) / (1 - pe_g) if pe_g < 1 - 1e-12 else None,
        # alpha = 1 - (n - 1) D_o / D_e with D_o = sum_u m_u d_u, about n (1 - p_a) (exact for equal m_u).
        "alpha": 1 - (n - 1) * n * (1 - po_low) / de if de > 0 else None,
    }


def _confusion_cells(a: np.ndarray, b: np.ndarray, Q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero cells of the confusion matrix of codes a (rows) against b: O(n log n), never Q^2."""
    pair, n = np.unique(a.astype(np.int64) * Q + b, return_counts=True)
    return _frozen(pair // Q), _frozen(pair % Q), _frozen(n.astype(np.int64))


def _pair_agreements(pair_data: dict, pair_rows: dict, Q: int, level: float) -> list[PairAgreement]:
    """Percent agreement and Cohen's kappa of each pair of coders, with their intervals or one-sided bounds."""
    pairs = []
    for (i, j), d in pair_data.items():
        ps = pair_rows[(i, j)]
        a, b = d.a, d.b
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
                _confusion_cells(a, b, Q),
                d_pair,
                Q,
            )
        )
    return pairs
