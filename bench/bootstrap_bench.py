"""Cluster bootstrap and agreement: ours (lib.stats) against a naive loop, on paper-shaped data.

Paper size: 229 repositories with skewed sizes summing to 1,189 GitHub episodes
plus 397 literature records (one cluster each), in 7 x 6 stage x capability
cells, iterative_execution x actuation about 64.8% of GitHub and 14.1% of
literature. The x100 size has 22,900 repositories (118,900 episodes) and 39,700
records. The naive implementation is the usual analysis script: a Python loop
over replicates, pandas .loc on the resampled clusters and a groupby count.

    python bench/bootstrap_bench.py            # B = 10,000, under 5 minutes on 2 cores
    python bench/bootstrap_bench.py --quick    # a small smoke run (the test suite runs it)

The last line is one JSON object with the keys DESIGN.md fixes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib import stats

STAGES, CAPS = 7, 6
K = STAGES * CAPS
HOT = 3 * CAPS + 3  # iterative_execution x actuation


def cell_probs(hot: float, rng: np.random.Generator) -> np.ndarray:
    rest = rng.dirichlet(np.full(K - 1, 0.6))
    p = np.insert(rest * (1 - hot), HOT, hot)
    return p / p.sum()


def repo_sizes(n_repos: int, total: int, rng: np.random.Generator) -> np.ndarray:
    """Skewed sizes (a few large repositories, many with one or two issues) that sum to `total`."""
    weights = rng.pareto(1.1, n_repos) + 0.05
    return 1 + rng.multinomial(total - n_repos, weights / weights.sum())


def make_data(scale: int, seed: int = 2025) -> dict:
    """Paper-shaped synthetic data; repositories differ in their cell mix (Dirichlet), as real ones do."""
    rng = np.random.default_rng(seed)
    p_gh, p_lit = cell_probs(0.648, rng), cell_probs(0.141, rng)
    sizes = repo_sizes(229 * scale, 1189 * scale, rng)
    repo_p = rng.dirichlet(p_gh * 8, size=len(sizes))
    gh_cells = np.concatenate([rng.choice(K, size=s, p=p) for s, p in zip(sizes, repo_p, strict=True)])
    gh_clusters = np.repeat(np.array([f"owner{i}/repo" for i in range(len(sizes))], dtype=object), sizes)
    n_lit = 397 * scale
    lit_cells = rng.choice(K, size=n_lit, p=p_lit)
    lit_clusters = np.array([f"paper{i}" for i in range(n_lit)], dtype=object)
    return {"gh": (gh_cells, gh_clusters), "lit": (lit_cells, lit_clusters), "sizes": sizes}


def ours(data: dict, B: int, seed: int = 1) -> dict:
    """Designs, replicates, per-cell intervals for both kinds and their difference."""
    a = stats.cluster_design(*data["gh"], K)
    b = stats.cluster_design(*data["lit"], K)
    ra, rb = stats.replicate_blocks([a, b], B=B, seed=seed)
    ca, cb = stats.cell_intervals(a, ra), stats.cell_intervals(b, rb)
    d = stats.diff_intervals(a, b, ra, rb)
    return {"a": ca, "b": cb, "diff": d}


def naive(data: dict, B: int, seed: int = 1) -> dict:
    """What an analysis script does: loop over replicates, resample clusters, pandas groupby."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    frames = {}
    for key in ("gh", "lit"):
        cells, clusters = data[key]
        frames[key] = pd.DataFrame({"cluster": clusters, "cell": cells}).set_index("cluster").sort_index()
    names = {key: frames[key].index.unique().to_numpy() for key in frames}
    reps = {key: np.zeros((B, K)) for key in frames}
    for r in range(B):
        for key, df in frames.items():
            drawn = names[key][rng.integers(0, len(names[key]), len(names[key]))]
            boot = df.loc[drawn]
            counts = boot.groupby("cell").size().reindex(range(K), fill_value=0).to_numpy()
            reps[key][r] = counts / counts.sum()
    diff = reps["gh"] - reps["lit"]
    return {
        "a": np.quantile(reps["gh"], [0.025, 0.975], axis=0),
        "diff": np.quantile(diff, [0.025, 0.975], axis=0),
    }


def agreement_data(U: int = 1500, R: int = 3, Q: int = 65, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    prevalence = rng.dirichlet(np.full(Q, 0.5))
    truth = rng.choice(Q, size=U, p=prevalence)
    codes = np.where(rng.random((U, R)) < 0.72, truth[:, None], rng.choice(Q, size=(U, R), p=prevalence))
    codes[rng.random((U, R)) < 0.05] = -1
    return codes


def timed(fn, *args, repeat: int = 3, **kwargs) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates (default 10,000; 500 with --quick)")
    args = parser.parse_args()
    B = args.bootstrap or (500 if args.quick else 10_000)
    B_naive = 100 if args.quick else B
    big_scale = 5 if args.quick else 100

    paper = make_data(1)
    print(f"paper: {len(paper['sizes'])} repositories, {len(paper['gh'][0])} GitHub episodes "
          f"(largest repository {paper['sizes'].max()}), {len(paper['lit'][0])} literature records")  # fmt: skip
    hot_gh = float(np.mean(paper["gh"][0] == HOT))
    hot_lit = float(np.mean(paper["lit"][0] == HOT))
    print(f"iterative_execution x actuation: GitHub {hot_gh:.1%}, literature {hot_lit:.1%}")

    paper_s, res = timed(ours, paper, B)
    print(f"ours  paper B={B}: {paper_s:.3f} s  (hot cell diff {res['diff'].estimate[HOT]:+.3f} "
          f"[{res['diff'].low[HOT]:+.3f}, {res['diff'].high[HOT]:+.3f}])")  # fmt: skip
    naive_s, nres = timed(naive, paper, B_naive, repeat=1)
    naive_paper_s = naive_s * B / B_naive  # --quick extrapolates from fewer naive replicates
    print(f"naive paper B={B_naive}: {naive_s:.2f} s (hot cell diff CI [{nres['diff'][0][HOT]:+.3f}, "
          f"{nres['diff'][1][HOT]:+.3f}]); per {B} replicates {naive_paper_s:.2f} s")  # fmt: skip
    ratio = naive_paper_s / paper_s
    print(f"ratio naive / ours at paper size: {ratio:.0f}x")

    big = make_data(big_scale, seed=2026)
    print(f"x{big_scale}: {len(big['sizes'])} repositories, {len(big['gh'][0])} GitHub episodes, "
          f"{len(big['lit'][0])} literature records")  # fmt: skip
    x100_s, _ = timed(ours, big, B, repeat=2)
    tracemalloc.start()
    ours(big, B)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    x100_peak_mb = peak / 2**20
    print(f"ours  x{big_scale} B={B}: {x100_s:.3f} s, peak traced memory {x100_peak_mb:.0f} MB")

    codes = agreement_data()
    agreement_s, agr = timed(stats.agreement, codes, 65, B=1000, seed=3)
    import krippendorff

    ref = krippendorff.alpha(
        reliability_data=np.where(codes < 0, np.nan, codes).T.astype(float), level_of_measurement="nominal"
    )
    alpha_abs_diff = abs(agr.krippendorff_alpha.value - ref)
    print(f"agreement 1500 x 3 coders x 65 types (B=1000 CIs): {agreement_s:.3f} s; "
          f"alpha {agr.krippendorff_alpha.value:.6f} vs krippendorff {ref:.6f}")  # fmt: skip

    print(json.dumps({
        "bench": "bootstrap", "B": B, "paper_s": round(paper_s, 4), "naive_paper_s": round(naive_paper_s, 2),
        "ratio": round(ratio, 1), "x100_s": round(x100_s, 3), "x100_peak_mb": round(x100_peak_mb, 1),
        "agreement_s": round(agreement_s, 4), "alpha_abs_diff": alpha_abs_diff,
        "quick": args.quick, "x_scale": big_scale, "naive_B": B_naive,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
