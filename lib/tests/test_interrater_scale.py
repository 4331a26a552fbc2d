"""lib.stats.agreement at scale (issue 31): the compact per-unit counts give the numbers of the dense units x
categories formulas they replaced, replicate by replicate, in memory and time linear in the units whatever the
number of categories (the overall axis's whole labels number thousands)."""

from __future__ import annotations

import itertools
import time
import tracemalloc

import numpy as np
import pytest

from lib import stats
from lib.stats import interrater


def many_labels(seed: int, U: int, R: int, Q: int, missing: float = 0.0, agree: float = 0.6) -> np.ndarray:
    """U units coded by R coders over Q categories: a shared truth kept with probability `agree`, else a random
    code (random whole labels: most categories used once or twice); `missing` of the ratings left out."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, Q, U)
    codes = np.where(rng.random((U, R)) < agree, truth[:, None], rng.integers(0, Q, (U, R)))
    codes[rng.random((U, R)) < missing] = -1
    return codes


def block_weights(U: int, B: int, seed: int) -> np.ndarray:
    """The documented stream: block i of BLOCK replicates drawn in one call from SeedSequence(seed, (7, i))."""
    rows = []
    for i in range(-(-B // stats.BLOCK)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7, i)))
        draws = rng.integers(0, U, size=(min(stats.BLOCK, B - i * stats.BLOCK), U))
        rows += [np.bincount(r, minlength=U) for r in draws]
    return np.array(rows, dtype=float)


def dense_statistics(codes: np.ndarray, Q: int, Qc: int, B: int, seed: int) -> tuple[dict, dict, np.ndarray]:
    """The formulas as a units x categories count matrix N and one-hot matrices give them (the implementation
    before issue 31): overall and per-pair statistics for the sample and each resample, and the specific
    agreement per category."""
    sub = codes[(codes >= 0).sum(axis=1) >= 1]
    U1, R = sub.shape
    N = np.zeros((U1, Q))
    for r in range(R):
        ok = sub[:, r] >= 0
        np.add.at(N, (np.flatnonzero(ok), sub[ok, r]), 1)
    W = np.vstack([np.ones((1, U1)), block_weights(U1, B, seed)])
    pairable = N.sum(axis=1) >= 2
    Np, Wp = N[pairable], W[:, pairable]
    m, sq = Np.sum(axis=1), (Np**2).sum(axis=1)
    po = (Wp @ ((sq - m) / (m * (m - 1)))) / Wp.sum(axis=1)
    nc = Wp @ Np
    n = nc.sum(axis=1)
    alpha = 1 - (n - 1) * (Wp @ ((m**2 - sq) / (m - 1))) / (n**2 - (nc**2).sum(axis=1))
    pi = (W @ (N / N.sum(axis=1)[:, None])) / W.sum(axis=1)[:, None]
    pe_f, pe_g = (pi**2).sum(axis=1), (pi * (1 - pi)).sum(axis=1) / (Qc - 1)
    overall = {"percent": po, "fleiss": (po - pe_f) / (1 - pe_f), "alpha": alpha, "ac1": (po - pe_g) / (1 - pe_g)}
    pairs, eye = {}, np.eye(Q)
    for i, j in itertools.combinations(range(R), 2):
        both = (sub[:, i] >= 0) & (sub[:, j] >= 0)
        a, b, Wb = sub[both, i], sub[both, j], W[:, both]
        tot = Wb.sum(axis=1)
        p = (Wb @ (a == b)) / tot
        pe = ((Wb @ eye[a]) * (Wb @ eye[b])).sum(axis=1) / tot**2
        pairs[(i, j)] = {"percent": p, "kappa": (p - pe) / (1 - pe)}
    with np.errstate(invalid="ignore"):
        specific = (Np * (Np - 1) / (m - 1)[:, None]).sum(axis=0) / Np.sum(axis=0)
    return overall, pairs, np.where(Np.sum(axis=0) > 0, specific, -1.0)


CASES = [  # (seed, units, coders, categories, missing): thousands of categories, as whole labels are
    (1, 1_500, 2, 3_000, 0.0),
    (2, 1_200, 3, 2_000, 0.3),  # units coded once enter the chance terms only
    (3, 900, 4, 600, 0.45),
]


@pytest.mark.parametrize("case", CASES)
def test_it_gives_the_dense_formulas_replicate_by_replicate_with_thousands_of_categories(case):
    seed, U, R, Q, missing = case
    codes = many_labels(seed, U, R, Q, missing)
    Qc, B = Q + 7, 300
    overall, pairs, _ = dense_statistics(codes, Q, Qc, B, seed=5)
    _, st, _, pair_rows = interrater._statistics(codes[(codes >= 0).sum(axis=1) >= 1], Qc, B=B, seed=5)
    for k, want in overall.items():
        assert st[k].shape == (B + 1,)
        np.testing.assert_allclose(st[k], want, rtol=0, atol=1e-12, err_msg=k)
    assert pair_rows.keys() == pairs.keys()
    for p, want in pairs.items():
        for k in ("percent", "kappa"):
            np.testing.assert_allclose(pair_rows[p][k], want[k], rtol=0, atol=1e-12, err_msg=f"{p} {k}")


@pytest.mark.parametrize("case", CASES)
def test_it_gives_the_dense_estimates_intervals_and_specific_agreement(case):
    seed, U, R, Q, missing = case
    codes = many_labels(seed, U, R, Q, missing)
    overall, pairs, specific = dense_statistics(codes, Q, Q, 400, seed=3)
    res = stats.agreement(codes, Q, B=400, seed=3)

    def same(est: stats.Estimate, values: np.ndarray) -> None:
        assert est.method == "percentile"
        low, high = np.quantile(values[1:], [0.025, 0.975])
        assert (est.value, est.low, est.high) == pytest.approx((values[0], low, high), abs=1e-12)

    for est, k in ((res.percent, "percent"), (res.fleiss_kappa, "fleiss"), (res.krippendorff_alpha, "alpha"),
                   (res.gwet_ac1, "ac1")):  # fmt: skip
        same(est, overall[k])
    for pair in res.pairs:
        same(pair.percent, pairs[(pair.coder_a, pair.coder_b)]["percent"])
        same(pair.kappa, pairs[(pair.coder_a, pair.coder_b)]["kappa"])
    assert len(res.pairs) == R * (R - 1) // 2
    np.testing.assert_allclose(res.specific, specific, rtol=0, atol=1e-12)
    assert (res.specific >= 0).sum() > Q // 3  # most categories used: the comparison covers them


def test_it_gives_kappa_of_a_pair_that_shares_no_category():
    """Two coders who never use the same category: no category enters p_e (0), and kappa equals p_o = 0."""
    codes = np.c_[np.arange(40) % 5, 5 + np.arange(40) % 4, np.arange(40) % 5]
    res = stats.agreement(codes, 9, B=200, seed=0)
    disjoint = next(p for p in res.pairs if (p.coder_a, p.coder_b) == (0, 1))
    assert disjoint.kappa.value == 0.0 and disjoint.percent.value == 0.0
    same = next(p for p in res.pairs if (p.coder_a, p.coder_b) == (0, 2))
    assert same.percent.value == 1.0 and same.kappa.one_sided


@pytest.mark.parametrize("rows", [1, 50, 128, 300])
def test_it_draws_the_documented_weights_in_chunks_that_split_blocks(rows):
    B, U = 3 * stats.BLOCK + 37, 11
    chunks = list(interrater._weight_chunks(U, B, 5, 7, max_cells=rows * U))
    assert [c.shape[0] for c in chunks[:-1]] == [rows] * (len(chunks) - 1) and chunks[-1].shape[0] <= rows
    assert np.array_equal(np.vstack(chunks), block_weights(U, B, 5))


def peak_bytes(codes: np.ndarray, Q: int) -> int:
    tracemalloc.start()
    try:
        stats.agreement(codes, Q, B=stats.BLOCK, seed=0)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_it_holds_200000_units_of_5000_whole_labels_in_memory_linear_in_the_units():
    """Dense, the counts alone were units x labels x 8 bytes: 8 GB here. Compact, the peak is about 650 bytes
    a unit (the weights of a chunk of replicates and a few per-unit vectors), and does not grow with labels."""
    many = peak_bytes(many_labels(7, 200_000, 2, 5_000), 5_000)
    few = peak_bytes(many_labels(7, 200_000, 2, 50), 50)
    assert many < 200 * 2**20, f"{many / 2**20:.0f} MB"
    assert many < 1.2 * few, f"{many / 2**20:.0f} MB with 5,000 labels against {few / 2**20:.0f} MB with 50"


def test_it_takes_time_linear_in_the_units_when_the_labels_grow_with_them():
    """4x the units (and 4x the distinct whole labels, as random codes give) may cost at most 10x the process
    time: linear is 4x (measured 4.3x on a quiet machine), and the dense counts, units x labels, were 16x (and
    40 GB at the larger size). The least of five runs is taken; CI once saw 7.1x with the suite running beside
    it on two cores, so the bound sits between the two growths rather than just above linear."""

    def cost(U: int) -> float:
        codes = many_labels(11, U, 2, U // 2)
        runs = []
        for _ in range(5):
            t = time.process_time()
            stats.agreement(codes, U // 2, B=stats.BLOCK, seed=0)
            runs.append(time.process_time() - t)
        return min(runs)

    small, large = cost(25_000), cost(100_000)
    assert large <= 10 * small, f"{large:.2f} s at 100,000 units against {small:.2f} s at 25,000"
