"""Coverage of every cell-share interval lib.stats offers, on clustered studies with known truth.

Each simulated study draws G repositories with lognormal or Pareto sizes
summing to N records (in the dominant-repository scenario one repository
holds a fixed share of them and the others share the rest). Every repository has its own cell mix, drawn from a
Dirichlet around the true shares with concentration (1 - ICC) / ICC, so the
intra-cluster correlation of every cell indicator is ICC (ICC 0: no
clustering). The true shares are 40%, 30%, 5%, 0.5% and 0.2%, with the rest
in one more cell. Every method in `stats.CELL_METHODS` is computed through
`stats.cell_intervals` on the real design (bootstrap methods on B replicates
drawn by `stats.replicate_blocks`), and the bench reports, per scenario and
true share, the coverage with its binomial standard error, the misses below
and above the interval, the median width and its ratio to the percentile
bootstrap's, the number of zero-width intervals (always a miss: every true
share is positive) and how many misses the few-clusters flag marked.

It checks the targets of issue 31 for the default method in every scenario:
93-97% coverage on the 30% and 5% cells, at least 90% on the rare cells
(0.5%, 0.2%) overall or among the intervals the few-clusters flag leaves
unmarked, and a median width at most 1.5 times the percentile's wherever the
percentile covers at least 93%.

    python bench/coverage_bench.py            # 2,000 studies per scenario, B = 1,000
    python bench/coverage_bench.py --quick    # the three headline scenarios, 200 studies, B = 200
    python bench/coverage_bench.py --only lognormal_icc0.17_12clusters --studies 300

The last line is one JSON object with the keys DESIGN.md fixes:
{"bench": "coverage", "default_method", "scenarios": [{"name", "coverage": {METHOD: {"0.3", "0.05", "0.005"}},
"zero_width": {METHOD: n}, "median_width_ratio": {METHOD: {SHARE: ratio}}}], "targets_met"}, plus the other
shares, widths, misses, flags and standard errors.
"""

from __future__ import annotations

import argparse
import itertools
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
    dominant: float = 0.0  # share of the records held by one repository (0: none dominates)


SCENARIOS = (
    Scenario("lognormal_icc0.17", "lognormal", 0.17, 150, 1500, True),
    Scenario("pareto_icc0.17", "pareto", 0.17, 150, 1500, True),
    Scenario("lognormal_icc0.05", "lognormal", 0.05, 150, 1500, True),
    Scenario("lognormal_icc0", "lognormal", 0.0, 150, 1500),
    Scenario("pareto_icc0.2_50clusters", "pareto", 0.2, 50, 1000),
    Scenario("lognormal_icc0.1_300clusters", "lognormal", 0.1, 300, 3000),
    Scenario("pareto_icc0.05_300clusters", "pareto", 0.05, 300, 2000),
    # Issue 31: few repositories, one dominant repository, and enough records for the 0.2% cell to have some.
    Scenario("lognormal_icc0.17_12clusters", "lognormal", 0.17, 12, 1500),
    Scenario("lognormal_icc0.17_20clusters", "lognormal", 0.17, 20, 1500),
    Scenario("lognormal_icc0.17_one_repo_40pct", "lognormal", 0.17, 150, 1500, dominant=0.4),
    Scenario("lognormal_icc0.05_300clusters_20000records", "lognormal", 0.05, 300, 20000),
)
RARE = ("0.005", "0.002")
TARGETED = ("0.3", "0.05")
# Bins of the largest repository's share of a study's records: the default's coverage per bin shows where
# over- and under-coverage offset each other within a scenario (docs/intervals.md, "What is left").
TOP_SHARE_BINS = (0.0, 0.1, 0.2, 0.3, 0.45, 1.0)


def cluster_sizes(sc: Scenario, rng: np.random.Generator) -> np.ndarray:
    """G sizes of at least 1 summing to N: lognormal (sigma 1) or Pareto (shape 1.1) weights.

    With `dominant`, the first repository holds that share of the records and the others share the rest.
    """
    w = rng.lognormal(0.0, 1.0, sc.clusters) if sc.sizes == "lognormal" else rng.pareto(1.1, sc.clusters) + 0.05
    if sc.dominant:
        big = round(sc.dominant * sc.records)
        rest = 1 + rng.multinomial(sc.records - big - (sc.clusters - 1), w[1:] / w[1:].sum())
        return np.concatenate([[big], rest])
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
    truth = TRUE[: len(SHARES)]
    zeros = {m: np.zeros(len(SHARES)) for m in stats.CELL_METHODS}
    hits, above, below, flagged_misses = ({m: z.copy() for m, z in zeros.items()} for _ in range(4))
    zero = dict.fromkeys(stats.CELL_METHODS, 0)
    widths = {m: [] for m in stats.CELL_METHODS}
    empty = np.zeros(len(SHARES))
    few = np.zeros(len(SHARES))
    top_bin, default_hits = [], []
    for i in range(studies):
        d = study(sc, rng, names)
        sizes = d.counts.sum(axis=1)
        top_bin.append(int(np.searchsorted(TOP_SHARE_BINS, sizes.max() / sizes.sum(), side="left")) - 1)
        reps = stats.replicate_blocks([d], B=B, seed=i, threads=1)[0]
        empty += d.totals[: len(SHARES)] == 0
        for m in stats.CELL_METHODS:
            iv = stats.cell_intervals(d, reps, method=m)
            lo, hi = iv.low[: len(SHARES)], iv.high[: len(SHARES)]
            hit = (lo <= truth) & (truth <= hi)
            hits[m] += hit
            above[m] += truth > hi
            below[m] += truth < lo
            flagged_misses[m] += ~hit & iv.few_clusters[: len(SHARES)]
            zero[m] += int(np.sum(hi - lo <= 0))
            widths[m].append(hi - lo)
            if m == stats.DEFAULT_CELL_METHOD:
                default_hits.append(hit)
        few += iv.few_clusters[: len(SHARES)]
    cov = {m: {k: round(float(h / studies), 4) for k, h in zip(KEYS, hits[m], strict=True)} for m in hits}
    median = {m: np.median(np.array(widths[m]), axis=0) for m in widths}
    base = median["percentile"]

    def ratio(w: np.ndarray) -> dict:
        return {k: (round(float(a / b), 3) if b > 0 else None) for k, a, b in zip(KEYS, w, base, strict=True)}

    def per_share(a: np.ndarray) -> dict:
        return {k: int(x) for k, x in zip(KEYS, a, strict=True)}

    def unflagged(m: str) -> dict:
        """Coverage among the intervals the flag left unmarked, per share (None where it marked them all)."""
        kept = studies - few
        missed = below[m] + above[m] - flagged_misses[m]
        return {k: (round(float(1 - x / n), 4) if n else None) for k, x, n in zip(KEYS, missed, kept, strict=True)}

    def by_top_share() -> dict:
        """The default's coverage of the targeted cells per bin of the largest repository's share."""
        bins, hit = np.array(top_bin), np.array(default_hits)
        out = {}
        for b, (lo, hi) in enumerate(itertools.pairwise(TOP_SHARE_BINS)):
            chosen = bins == b
            if chosen.any():
                cov = hit[chosen].mean(axis=0)
                shares = {k: round(float(cov[KEYS.index(k)]), 4) for k in TARGETED}
                out[f"{lo:g}-{hi:g}"] = {"studies": int(chosen.sum()), "coverage": shares}
        return out

    return {
        "name": sc.name,
        "sizes": sc.sizes,
        "icc": sc.icc,
        "clusters": sc.clusters,
        "records": sc.records,
        "dominant": sc.dominant,
        "studies": studies,
        "coverage": cov,
        "se": {m: {k: round(float(np.sqrt(c * (1 - c) / studies)), 4) for k, c in cov[m].items()} for m in cov},
        "miss_below": {m: per_share(below[m]) for m in below},
        "miss_above": {m: per_share(above[m]) for m in above},
        "flagged_misses": {m: per_share(flagged_misses[m]) for m in flagged_misses},
        "unflagged_coverage": {m: unflagged(m) for m in hits},
        "median_width": {m: {k: round(float(w), 5) for k, w in zip(KEYS, median[m], strict=True)} for m in median},
        "median_width_ratio": {m: ratio(median[m]) for m in median},
        "zero_width": zero,
        "empty_cell_studies": {k: int(e) for k, e in zip(KEYS, empty, strict=True)},
        "few_clusters_studies": {k: int(f) for k, f in zip(KEYS, few, strict=True)},
        "default_by_top_share": by_top_share(),
    }


def unflagged_coverage(r: dict, method: str, k: str) -> float | None:
    """Coverage among the intervals the few-clusters flag left unmarked (None when it marked them all)."""
    unflagged = r["studies"] - r["few_clusters_studies"][k]
    misses = r["miss_below"][method][k] + r["miss_above"][method][k] - r["flagged_misses"][method][k]
    return 1 - misses / unflagged if unflagged else None


def target_failures(r: dict, method: str = stats.DEFAULT_CELL_METHOD) -> list[str]:
    """Where `method` misses issue 31's targets in one scenario's result (an empty list: all met)."""
    out = []
    cov, pct = r["coverage"][method], r["coverage"]["percentile"]
    for k in TARGETED:
        if not 0.93 <= cov[k] <= 0.97:
            out.append(f"{r['name']}: {k} cell covers {cov[k]:.1%}, outside 93-97%")
    for k in RARE:
        unflagged = unflagged_coverage(r, method, k)
        if cov[k] < 0.9 and unflagged is not None and unflagged < 0.9:
            out.append(f"{r['name']}: {k} cell covers {cov[k]:.1%}, and {unflagged:.1%} where not flagged")
    for k in KEYS:
        ratio = r["median_width_ratio"][method][k]
        if pct[k] >= 0.93 and ratio is not None and ratio > 1.5:
            out.append(f"{r['name']}: {k} cell is {ratio:.2f}x the percentile's width where it covers {pct[k]:.1%}")
    return out


def print_scenario(r: dict) -> None:
    print(f"\n{r['name']}: {r['clusters']} clusters, {r['records']} records, {r['sizes']} sizes, "
          f"ICC {r['icc']}, {r['studies']} studies; empty cells {r['empty_cell_studies']}")  # fmt: skip
    head = "".join(f"{k:>27}" for k in KEYS)
    print(f"  {'method':<16}{head}  zero-width   (coverage±se below/above(flagged) xwidth vs percentile)")
    for m in stats.CELL_METHODS:
        row = "".join(
            f"{100 * r['coverage'][m][k]:>6.1f}±{100 * r['se'][m][k]:.1f} {r['miss_below'][m][k]:>3}/"
            f"{r['miss_above'][m][k]:<3}({r['flagged_misses'][m][k]:>3}) x{_ratio(r['median_width_ratio'][m][k])}"
            for k in KEYS
        )
        print(f"  {m:<16}{row}  {r['zero_width'][m]}")
    print("  default by the largest repository's share of the records (30% / 5% cell): " + "; ".join(
        f"{b}: {100 * v['coverage']['0.3']:.1f}% / {100 * v['coverage']['0.05']:.1f}% ({v['studies']})"
        for b, v in r["default_by_top_share"].items()))  # fmt: skip
    for line in target_failures(r):
        print(f"  target missed: {line}")


def _ratio(x: float | None) -> str:
    return "  -- " if x is None else f"{x:4.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three scenarios, 200 studies, B = 200")
    parser.add_argument("--studies", type=int, default=None, help="studies per scenario (default 2,000)")
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates per study (default 1,000)")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--only", action="append", choices=[s.name for s in SCENARIOS], help="run these scenarios")
    args = parser.parse_args()
    studies = args.studies or (200 if args.quick else 2000)
    B = args.bootstrap or (200 if args.quick else 1000)
    scenarios = [s for s in SCENARIOS if s.headline] if args.quick else list(SCENARIOS)
    if args.only:
        scenarios = [s for s in SCENARIOS if s.name in args.only]
    t0 = time.perf_counter()
    results = []
    for sc in scenarios:
        results.append(run_scenario(sc, studies, B, args.seed))
        print_scenario(results[-1])
    seconds = time.perf_counter() - t0
    failures = [line for r in results for line in target_failures(r)]
    print(f"\ndefault method: {stats.DEFAULT_CELL_METHOD}; {seconds:.1f} s; targets "
          + ("met in every scenario" if not failures else f"missed {len(failures)} times"))  # fmt: skip
    print(json.dumps({
        "bench": "coverage", "default_method": stats.DEFAULT_CELL_METHOD, "methods": list(stats.CELL_METHODS),
        "studies": studies, "B": B, "seed": args.seed, "seconds": round(seconds, 1), "quick": args.quick,
        "targets_met": not failures, "target_failures": failures, "scenarios": results,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
