"""Pure statistics for Faultline's analysis: numpy arrays in, frozen dataclasses out.

Nothing here imports Django (an import contract in pyproject.toml holds it to that). `annotate.analysis`
builds the arrays from a study and turns these results into JSON documents, pages and figures. The modules:
designs (checks, matrices, cluster designs), bootstrap (replicates), intervals, sensitivity_checks,
interrater (agreement between coders) and attribution (who-and-when). This package re-exports their public
names, so `from lib import stats` reads as the one module it grew out of (taxonomy/stats.py). The two modules
whose main function shares their subject are named apart from it (interrater, sensitivity_checks), so that
`stats.agreement` and `stats.sensitivity` stay the functions and never become shadowed submodules.

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

from lib.stats.bootstrap import (
    BETA_METHODS,
    BLOCK,
    BOOTSTRAP_METHODS,
    CELL_METHOD_ALIASES,
    CELL_METHOD_LABELS,
    CELL_METHOD_NAMES,
    CELL_METHODS,
    DEFAULT_CELL_METHOD,
    FLOAT32_EXACT,
    HEAVY_MULTIPLICITY,
    LIGHT_CELLS,
    MIN_CLUSTERS,
    CellBootstrap,
    DiffBootstrap,
    Interval,
    ProgressFn,
    canonical_method,
    design_enough,
    n_blocks,
    replicate_blocks,
    replicate_proportions,
)
from lib.stats.designs import (
    CellMatrix,
    ClusterDesign,
    Distribution,
    cell_matrix,
    cluster_design,
    counts_design,
    design_without,
    distribution,
    record_design,
)
from lib.stats.interrater import (
    ONE_SIDED_METHOD,
    UNDEFINED_WARN,
    AxisAgreement,
    Estimate,
    PairAgreement,
    agreement,
    one_sided_disagreement,
)
from lib.stats.intervals import (
    EffectiveSizes,
    Proportion,
    SurveyBeta,
    analytic_limits,
    bell_mccaffrey_df,
    bootstrap_diff_cell,
    cell_icc,
    cell_intervals,
    clustered_df,
    clusters_with_records,
    diff_intervals,
    effective_clusters,
    effective_sizes,
    exact_binomial_bounds,
    korn_graubard_limits,
    svyciprop_sizes,
    wilson,
)
from lib.stats.sensitivity_checks import SensitivityCheck, sensitivity

__all__ = [
    "BETA_METHODS",
    "BLOCK",
    "BOOTSTRAP_METHODS",
    "CELL_METHODS",
    "CELL_METHOD_ALIASES",
    "CELL_METHOD_LABELS",
    "CELL_METHOD_NAMES",
    "DEFAULT_CELL_METHOD",
    "FLOAT32_EXACT",
    "HEAVY_MULTIPLICITY",
    "LIGHT_CELLS",
    "MIN_CLUSTERS",
    "ONE_SIDED_METHOD",
    "UNDEFINED_WARN",
    "AxisAgreement",
    "CellBootstrap",
    "CellMatrix",
    "ClusterDesign",
    "DiffBootstrap",
    "Distribution",
    "EffectiveSizes",
    "Estimate",
    "Interval",
    "PairAgreement",
    "ProgressFn",
    "Proportion",
    "SensitivityCheck",
    "SurveyBeta",
    "agreement",
    "analytic_limits",
    "bell_mccaffrey_df",
    "bootstrap_diff_cell",
    "canonical_method",
    "cell_icc",
    "cell_intervals",
    "cell_matrix",
    "cluster_design",
    "clustered_df",
    "clusters_with_records",
    "counts_design",
    "design_enough",
    "design_without",
    "diff_intervals",
    "distribution",
    "effective_clusters",
    "effective_sizes",
    "exact_binomial_bounds",
    "korn_graubard_limits",
    "n_blocks",
    "one_sided_disagreement",
    "record_design",
    "replicate_blocks",
    "replicate_proportions",
    "sensitivity",
    "svyciprop_sizes",
    "wilson",
]
