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
    sub = codes[rated]
    N = _unit_counts(sub, Q)
    U1 = sub.shape[0]
    pair_data = _pair_data(sub, Q)
    st, pair_rows = _replicates(N, pairable, Qc, pair_data, U1=U1, B=B, seed=seed)
    Np = N[pairable]
    m = Np.sum(axis=1)
    D, bounds = _one_sided_bounds(Np, m, st, U, level)
    pairs = _pair_agreements(pair_data, pair_rows, Q, level)
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


def _pair_data(sub: np.ndarray, Q: int) -> dict[tuple[int, int], tuple]:
    """Per pair of coders who share a unit: the shared units, agreement per unit, one-hot codes and the codes."""
    pair_data = {}
    for i, j in itertools.combinations(range(sub.shape[1]), 2):
        both = (sub[:, i] >= 0) & (sub[:, j] >= 0)
        if both.any():
            a, b = sub[both, i], sub[both, j]
            pair_data[(i, j)] = (both, (a == b).astype(float), _onehot(a, Q), _onehot(b, Q), a, b)
    return pair_data


def _replicates(N, pairable, Qc, pair_data, *, U1: int, B: int, seed: int) -> tuple[dict, dict]:
    """The statistics on the sample (row 0) and on B weighted resamples of the units, overall and per pair."""
    ones = np.ones((1, U1))
    rows = {k: [v] for k, v in _agreement_stats(ones, N, pairable, Qc).items()}
    pair_rows = {p: {k: [v] for k, v in _pair_stats(ones[:, d[0]], *d[1:4]).items()} for p, d in pair_data.items()}
    for Wt in _weight_chunks(U1, B, seed, stream=7):
        for k, v in _agreement_stats(Wt, N, pairable, Qc).items():
            rows[k].append(v)
        for p, d in pair_data.items():
            for k, v in _pair_stats(Wt[:, d[0]], *d[1:4]).items():
                pair_rows[p][k].append(v)
    return {k: np.concatenate(v) for k, v in rows.items()}, pair_rows


def _one_sided_bounds(Np: np.ndarray, m: np.ndarray, st: dict, U: int, level: float) -> tuple[int, dict]:
    """How many units hold a disagreement, and each statistic's one-sided lower bound (ONE_SIDED_METHOD)."""
    dis = 1 - ((Np**2).sum(axis=1) - m) / (m * (m - 1))  # share of disagreeing pairs per unit
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
                _confusion_cells(a, b, Q),
                d_pair,
                Q,
            )
        )
    return pairs
