"""Coverage of every cell-share interval lib.stats offers, on clustered studies with known truth.

Each simulated study draws G repositories with lognormal or Pareto sizes
summing to N records. Every repository has its own cell mix, drawn from a
Dirichlet around the true shares with concentration (1 - ICC) / ICC, so the
intra-cluster correlation of every cell indicator is ICC (ICC 0: no
clustering). The true shares are 40%, 30%, 5%, 0.5% and 0.2%, with the rest
in one more cell. Every method in `stats.CELL_METHODS` is computed through
`stats.cell_intervals` on the real design (bootstrap methods on B replicates
drawn by `stats.replicate_blocks`), and the bench reports, per scenario and
true share, the coverage with its binomial standard error, the median width
and the number of zero-width intervals (always a miss: every true share is
positive).

    python bench/coverage_bench.py            # 2,000 studies per scenario, B = 1,000
    python bench/coverage_bench.py --quick    # the three headline scenarios, 200 studies, B = 200

The last line is one JSON object with the keys DESIGN.md fixes:
{"bench": "coverage", "default_method", "scenarios": [{"name", "coverage": {METHOD: {"0.3", "0.05", "0.005"}},
"zero_width": {METHOD: n}}]}, plus the other shares, widths and standard errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib import stats

SHARES = (0.4, 0.3, 0.05, 0.005, 0.002)
TRUE = np.array([*SHARES, 1 - sum(SHARES)])
KEYS = tuple(f"{s:g}" for s in SHARES)  # "0.4", "0.3", "0.05", "0.005", "0.002"


@dataclass(frozen=True)
class Scenario:
    name: str
    sizes: str  # lognormal | pareto
    icc: float
    clusters: int
    records: int
    headline: bool = False  # one of the three scenarios the issue fixes targets for


SCENARIOS = (
    Scenario("lognormal_icc0.17", "lognormal", 0.17, 150, 1500, True),
    Scenario("pareto_icc0.17", "pareto", 0.17, 150, 1500, True),
    Scenario("lognormal_icc0.05", "lognormal", 0.05, 150, 1500, True),
    Scenario("lognormal_icc0", "lognormal", 0.0, 150, 1500),
    Scenario("pareto_icc0.2_50clusters", "pareto", 0.2, 50, 1000),
    Scenario("lognormal_icc0.1_300clusters", "lognormal", 0.1, 300, 3000),
    Scenario("pareto_icc0.05_300clusters", "pareto", 0.05, 300, 2000),
)


def cluster_sizes(sc: Scenario, rng: np.random.Generator) -> np.ndarray:
    """G sizes of at least 1 summing to N: lognormal (sigma 1) or Pareto (shape 1.1) weights."""
    w = rng.lognormal(0.0, 1.0, sc.clusters) if sc.sizes == "lognormal" else rng.pareto(1.1, sc.clusters) + 0.05
    return 1 + rng.multinomial(sc.records - sc.clusters, w / w.sum())


def study(sc: Scenario, rng: np.random.Generator, names: np.ndarray) -> stats.ClusterDesign:
    """One simulated study as a design built the way the app builds it (episode cells and cluster names)."""
    sizes = cluster_sizes(sc, rng)
    if sc.icc > 0:
        mix = rng.dirichlet(TRUE * (1 - sc.icc) / sc.icc, size=sc.clusters)
        mix = np.nan_to_num(mix)
        mix /= mix.sum(axis=1, keepdims=True)
    else:
        mix = np.broadcast_to(TRUE, (sc.clusters, len(TRUE)))
    counts = rng.multinomial(sizes, mix)
    cells = np.repeat(np.tile(np.arange(len(TRUE)), sc.clusters), counts.ravel())
    return stats.cluster_design(cells, np.repeat(names, sizes), len(TRUE))


def run_scenario(sc: Scenario, studies: int, B: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, SCENARIOS.index(sc)])
    names = np.array([f"owner{g:04d}/repo" for g in range(sc.clusters)], dtype=object)
    hits = {m: np.zeros(len(SHARES)) for m in stats.CELL_METHODS}
    above = {m: np.zeros(len(SHARES)) for m in stats.CELL_METHODS}
    zero = dict.fromkeys(stats.CELL_METHODS, 0)
    widths = {m: [] for m in stats.CELL_METHODS}
    empty = np.zeros(len(SHARES))
    few = np.zeros(len(SHARES))
    for i in range(studies):
        d = study(sc, rng, names)
        reps = stats.replicate_blocks([d], B=B, seed=i, threads=1)[0]
        empty += d.totals[: len(SHARES)] == 0
        for m in stats.CELL_METHODS:
            iv = stats.cell_intervals(d, reps, method=m)
            lo, hi = iv.low[: len(SHARES)], iv.high[: len(SHARES)]
            hits[m] += (lo <= TRUE[: len(SHARES)]) & (TRUE[: len(SHARES)] <= hi)
            above[m] += TRUE[: len(SHARES)] > hi
            zero[m] += int(np.sum(hi - lo <= 0))
            widths[m].append(hi - lo)
        few += iv.few_clusters[: len(SHARES)]
    cov = {m: {k: round(float(h / studies), 4) for k, h in zip(KEYS, hits[m], strict=True)} for m in hits}
    return {
        "name": sc.name,
        "sizes": sc.sizes,
        "icc": sc.icc,
        "clusters": sc.clusters,
        "records": sc.records,
        "studies": studies,
        "coverage": cov,
        "se": {m: {k: round(float(np.sqrt(c * (1 - c) / studies)), 4) for k, c in cov[m].items()} for m in cov},
        "miss_above": {m: {k: int(a) for k, a in zip(KEYS, above[m], strict=True)} for m in above},
        "median_width": {
            m: {k: round(float(w), 5) for k, w in zip(KEYS, np.median(np.array(widths[m]), axis=0), strict=True)}
            for m in widths
        },
        "zero_width": zero,
        "empty_cell_studies": {k: int(e) for k, e in zip(KEYS, empty, strict=True)},
        "few_clusters_studies": {k: int(f) for k, f in zip(KEYS, few, strict=True)},
    }


def print_scenario(r: dict) -> None:
    print(f"\n{r['name']}: {r['clusters']} clusters, {r['records']} records, {r['sizes']} sizes, "
          f"ICC {r['icc']}, {r['studies']} studies; empty cells {r['empty_cell_studies']}")  # fmt: skip
    head = "".join(f"{k:>20}" for k in KEYS)
    print(f"  {'method':<16}{head}  zero-width")
    for m in stats.CELL_METHODS:
        row = "".join(
            f"{100 * r['coverage'][m][k]:>7.1f}±{100 * r['se'][m][k]:.1f} w{r['median_width'][m][k]:.4f}" for k in KEYS
        )
        print(f"  {m:<16}{row}  {r['zero_width'][m]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three scenarios, 200 studies, B = 200")
    parser.add_argument("--studies", type=int, default=None, help="studies per scenario (default 2,000)")
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates per study (default 1,000)")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    studies = args.studies or (200 if args.quick else 2000)
    B = args.bootstrap or (200 if args.quick else 1000)
    scenarios = [s for s in SCENARIOS if s.headline] if args.quick else list(SCENARIOS)
    t0 = time.perf_counter()
    results = []
    for sc in scenarios:
        results.append(run_scenario(sc, studies, B, args.seed))
        print_scenario(results[-1])
    seconds = time.perf_counter() - t0
    print(f"\ndefault method: {stats.DEFAULT_CELL_METHOD}; {seconds:.1f} s")
    print(json.dumps({
        "bench": "coverage", "default_method": stats.DEFAULT_CELL_METHOD, "methods": list(stats.CELL_METHODS),
        "studies": studies, "B": B, "seconds": round(seconds, 1), "quick": args.quick, "scenarios": results,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
