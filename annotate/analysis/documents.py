"""Analysis selectors: a study's labels as arrays, and the JSON documents built from them.

Every statistic is computed by the pure functions of `lib.stats`. The documents returned here are what the
`analyze` and `coverage` commands print with `--json`, what the API serves and what the pages render, so the
three never disagree. Nothing here writes to the database."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotate.analysis.arrays import (
    KINDS,
    NOT_A_FAILURE,
    Axes,
    LabelArrays,
    cell_index,
    codebook_axes,
    designs,
    label_arrays,
)
from annotate.analysis.bootstrap import ProgressFn, compute_replicates
from annotate.analysis.params import LEVEL, Params
from annotate.analysis.versions import version_axes, version_choice, version_labels
from annotate.models import DocumentKind, Episode, Study
from lib import stats

KIND_LABELS = dict(DocumentKind.choices)
NEEDS_NEW_TYPE = "needs_new_type"


# ---------------------------------------------------------------------------
# The analysis document


def _f(x) -> float | None:
    """A JSON number; non-finite values never leave this module."""
    if x is None:
        return None
    x = float(x)
    return x if np.isfinite(x) else None


def _grid(a: np.ndarray, shape: tuple[int, int], as_int: bool = False) -> list[list]:
    a = np.asarray(a).reshape(shape)
    return [[int(v) if as_int else _f(v) for v in row] for row in a]


def _distribution(values: np.ndarray, names: tuple[tuple[str, str], ...], missing_label: str | None = None) -> list:
    d = stats.distribution(values, len(names))
    out = [
        {"code": code, "name": name, "count": int(c), "proportion": _f(c / d.n) if d.n else None}
        for (code, name), c in zip(names, d.counts, strict=True)
    ]
    if missing_label and d.missing:
        out.append(
            {"code": missing_label, "name": "Needs a new type", "count": d.missing, "proportion": _f(d.missing / d.n)}
        )
    return out


def _kind_section(i: int, design, boot, labels: LabelArrays, axes: Axes) -> dict:
    kind = KINDS[i]
    shape = (len(axes.stages), len(axes.capabilities))
    m = labels.kind == i
    counts = design.totals.reshape(shape)
    ok = design.n > 0
    return {
        "kind": kind,
        "label": KIND_LABELS[kind],
        "status": "ok" if boot.enough else "not_enough_data",
        "reason": boot.reason,
        "n_episodes": design.n,
        "n_clusters": design.n_clusters,
        "largest_cluster": {"name": design.names[int(np.argmax(design.sizes))], "size": int(design.sizes.max())}
        if ok
        else None,
        "counts": _grid(counts, shape, as_int=True),
        "row_totals": [int(x) for x in counts.sum(axis=1)],
        "col_totals": [int(x) for x in counts.sum(axis=0)],
        "proportions": _grid(counts / design.n, shape) if ok else None,
        "ci_low": _grid(boot.low, shape) if boot.enough else None,
        "ci_high": _grid(boot.high, shape) if boot.enough else None,
        "interval": boot.method,
        "interval_name": stats.CELL_METHOD_NAMES[boot.method],
        "clusters_with_records": _grid(boot.clusters_with_records, shape, as_int=True),
        "effective_clusters": _grid(boot.effective_clusters, shape) if boot.enough else None,
        "few_clusters": _flags(boot.few_clusters, shape),
        "n_eff": _grid(boot.n_eff, shape) if boot.enough else None,
        "df": _grid(boot.df, shape) if boot.enough else None,
        "df_upper": _grid(boot.df_upper, shape) if boot.enough else None,
        "distributions": {
            "failure_type": _distribution(labels.failure_type[m], axes.types, NEEDS_NEW_TYPE),
            "category": _distribution(labels.category[m], axes.categories),
            "source": _distribution(labels.source[m], axes.sources),
        },
        "excluded": dict(sorted(labels.excluded[kind].items())),
    }


def _flags(a: np.ndarray, shape: tuple[int, int]) -> list[list[bool]]:
    return [[bool(v) for v in row] for row in np.asarray(a).reshape(shape)]


def _diff_section(a: int, b: int, diff: stats.DiffBootstrap, axes: Axes) -> dict:
    shape = (len(axes.stages), len(axes.capabilities))
    return {
        "a": KINDS[a],
        "b": KINDS[b],
        "status": "ok" if diff.enough else "not_enough_data",
        "reason": diff.reason,
        "estimate": _grid(diff.estimate, shape),
        "ci_low": _grid(diff.low, shape) if diff.enough else None,
        "ci_high": _grid(diff.high, shape) if diff.enough else None,
        "excludes_zero": [[bool(v) for v in row] for row in diff.excludes_zero.reshape(shape)] if diff.enough else None,
        "interval": diff.method,
        "few_clusters": _flags(diff.few_clusters, shape),
    }


def _check_json(c: stats.SensitivityCheck, a: str, b: str) -> dict:
    detail = dict(c.detail)
    if "most_influential" in detail:
        mi = dict(detail["most_influential"])
        mi["kind"] = a if mi.pop("side") == "a" else b
        mi["shift"] = _f(mi["shift"])
        detail["most_influential"] = mi
    if "a_size" in detail:
        detail = {
            "clusters": [
                {"kind": kind, "cluster": detail[side], "size": detail[f"{side}_size"]}
                for side, kind in (("a", a), ("b", b))
                if detail[side] is not None
            ]
        }
    detail = {k: (_f(v) if isinstance(v, float | np.floating) else v) for k, v in detail.items()}
    return {
        "check": c.name,
        "description": c.description,
        "status": "ok" if c.enough else "not_enough_data",
        "reason": c.reason,
        "estimate": _f(c.estimate),
        "ci_low": _f(c.low),
        "ci_high": _f(c.high),
        "keeps_sign": c.keeps_sign,
        "excludes_zero": c.excludes_zero,
        "detail": detail,
    }


def _default_cell(diff: stats.DiffBootstrap, axes: Axes) -> tuple[int, int]:
    """The cell with the largest absolute difference (ties: first in codebook order)."""
    k = int(np.argmax(np.abs(diff.estimate))) if diff.estimate.size else 0
    return divmod(k, len(axes.capabilities))


def _contrast_section(ds: list, diffs: dict, p: Params, axes: Axes, sensitivity: bool) -> dict:
    """The asked-for contrast between two kinds in one cell (given, or the largest difference), with its checks."""
    ka, kb = (KINDS.index(k) for k in p.contrast)
    lo, hi = min(ka, kb), max(ka, kb)
    base = diffs[(lo, hi)]
    sign = 1 if ka == lo else -1
    stage, cap = p.cell if p.cell is not None else _default_cell(base, axes)
    k = cell_index(axes, stage, cap)
    contrast = {"a": KINDS[ka], "b": KINDS[kb]}
    contrast.update(_contrast(ds[ka], ds[kb], k, sign, base, p, sensitivity, KINDS[ka], KINDS[kb]))
    contrast.update(
        {
            "cell": {"stage": axes.stages[stage][0], "capability": axes.capabilities[cap][0]},
            "cell_chosen": "given" if p.cell is not None else "largest_difference",
        }
    )
    return contrast


def _parameters_section(study: Study, p: Params, axes: Axes) -> dict:
    return {
        "bootstrap": p.bootstrap,
        "seed": p.seed,
        "level": p.level,
        "interval": p.interval,
        "interval_name": stats.CELL_METHOD_NAMES[p.interval],
        "interval_default": stats.DEFAULT_CELL_METHOD,
        "interval_methods": list(stats.CELL_METHODS),
        "difference_interval": "bca" if p.diff_bca else "percentile",
        "min_clusters": stats.MIN_CLUSTERS,
        "resampling": "clusters with replacement, within each kind",
        "block": stats.BLOCK,
        "cap": p.cap,
        "subsamples": p.subsamples,
        "codebook": axes.codebook,
        "label_rule": study.label_rule,
        "label_coder": _label_coder(study),
    }


def analysis_document(
    study: Study,
    params: Params | None = None,
    *,
    axes: Axes | None = None,
    labels: LabelArrays | None = None,
    replicates: list[np.ndarray] | None = None,
    progress: ProgressFn | None = None,
    sensitivity: bool = True,
) -> dict:
    """Matrices per kind with cluster-bootstrap intervals, differences, the contrast and its checks.

    `replicates` lets a chunked Celery run hand in replicate counts computed
    elsewhere; they are the same numbers `compute_replicates` would draw.
    """
    p = params or Params()
    choice = version_choice(study, p.version)
    axes = axes or version_axes(study, choice)
    labels = labels or version_labels(study, choice, axes)
    ds = designs(labels, axes)
    reps = replicates if replicates is not None else compute_replicates(ds, p, progress=progress)
    boots = [stats.cell_intervals(d, r, level=p.level, method=p.interval) for d, r in zip(ds, reps, strict=True)]
    diffs = {
        (a, b): stats.diff_intervals(
            ds[a], ds[b], reps[a], reps[b], level=p.level, bca=p.diff_bca, names=(KINDS[a], KINDS[b])
        )
        for a, b in combinations(range(len(KINDS)), 2)
    }
    contrast = _contrast_section(ds, diffs, p, axes, sensitivity)
    excluded = Counter()
    for kind in KINDS:
        excluded.update(labels.excluded[kind])
    return {
        "schema": "faultline.analysis/1",
        "study": {"slug": study.slug, "name": study.name},
        "parameters": {**_parameters_section(study, p, axes), **_version_section(choice)},
        "data": {
            "as_of": labels.as_of,
            "fingerprint": labels.fingerprint,
            "episodes": labels.n_episodes,
            "labelled_primary": len(labels.episode_id),
            "holdout": len(labels.holdout),
        },
        "axes": {
            "stages": [{"code": c, "name": n} for c, n in axes.stages],
            "capabilities": [{"code": c, "name": n} for c, n in axes.capabilities],
        },
        "kinds": [_kind_section(i, ds[i], boots[i], labels, axes) for i in range(len(KINDS))],
        "differences": [_diff_section(a, b, d, axes) for (a, b), d in diffs.items()],
        "contrast": contrast,
        "excluded": {
            "total": sum(excluded.values()),
            "by_reason": dict(sorted(excluded.items())),
            "holdout_not_in_matrices": len(labels.holdout),
        },
        "generated_at": timezone.now().isoformat(),
    }


def _contrast(
    da, db, k: int, sign: int, base: stats.DiffBootstrap, p: Params, with_checks: bool, a: str, b: str
) -> dict:
    """The chosen cell's p_a - p_b with its interval and sensitivity checks."""
    out = {
        "a_count": int(da.totals[k]),
        "a_n": da.n,
        "b_count": int(db.totals[k]),
        "b_n": db.n,
        "status": "ok" if base.enough else "not_enough_data",
        "reason": base.reason,
    }
    if not base.enough:
        return {**out, "estimate": None, "ci_low": None, "ci_high": None, "excludes_zero": None, "sensitivity": [],
                "few_clusters": bool(base.few_clusters[k])}  # fmt: skip
    out["few_clusters"] = bool(base.few_clusters[k])
    est, low, high = sign * base.estimate[k], base.low[k], base.high[k]
    low, high = (low, high) if sign > 0 else (-high, -low)
    iv = stats.Interval(float(est), float(low), float(high))
    checks = []
    if with_checks:
        b_sens = min(p.bootstrap, 2000)
        for c in stats.sensitivity(
            da, db, k, B=b_sens, seed=p.seed, level=p.level, cap=p.cap, subsamples=p.subsamples, baseline=iv
        ):
            checks.append(_check_json(c, a, b))
    return {
        **out,
        "estimate": _f(iv.estimate),
        "ci_low": _f(iv.low),
        "ci_high": _f(iv.high),
        "excludes_zero": iv.excludes_zero,
        "sensitivity_bootstrap": min(p.bootstrap, 2000) if with_checks else None,
        "sensitivity": checks,
    }


def _version_section(choice) -> dict:
    """Which codebook version the numbers use, and which others the study used (newest first)."""
    return {"codebook_versions": list(choice.versions), "codebook_current": choice.versions[0],
            "version": choice.key}  # fmt: skip


def _label_coder(study: Study) -> str | None:
    if study.label_coder_id is None:
        return None
    return get_user_model().objects.filter(pk=study.label_coder_id).values_list("username", flat=True).first()


# ---------------------------------------------------------------------------
# Episodes of one cell (the heatmap's click-through)


def cell_episodes(
    study: Study, kind: str, stage: str, capability: str, *, after: int = 0, limit: int = 200, version=None
):
    """One page of the primary episodes whose final label falls in (kind, stage, capability), in id order
    after the keyset cursor `after` (an episode id), with their documents and the next page's cursor.
    `version`: a VersionChoice (annotate.analysis.versions) for an earlier codebook version's labels."""
    axes = codebook_axes(study) if version is None else version_axes(study, version)
    labels = label_arrays(study, axes) if version is None else version_labels(study, version, axes)
    stages = [c for c, _ in axes.stages]
    caps = [c for c, _ in axes.capabilities]
    if kind not in KINDS or stage not in stages or capability not in caps:
        return None
    m = (labels.kind == KINDS.index(kind)) & (labels.stage == stages.index(stage))
    m &= labels.capability == caps.index(capability)
    ids = labels.episode_id[m]  # sorted: label_arrays keeps episode id order
    page = ids[ids > after][: limit + 1].tolist()
    episodes = list(
        Episode.objects.filter(pk__in=page[:limit])
        .select_related("document")
        .only("id", "excerpt", "document__title", "document__url", "document__cluster", "document__kind")
        .order_by("id")
    )
    return {"total": int(m.sum()), "episodes": episodes, "next_after": page[limit - 1] if len(page) > limit else None,
            "after": after, "stage_name": dict(axes.stages)[stage],
            "capability_name": dict(axes.capabilities)[capability]}  # fmt: skip


# ---------------------------------------------------------------------------
# Hold-out coverage


def coverage_document(
    study: Study, *, level: float = LEVEL, labels: LabelArrays | None = None, version: str | None = None
) -> dict:
    """The share of hold-out episodes coded to an existing type, with a Wilson interval.

    The denominator is hold-out failures with a usable label: coded to a type
    (covered) or marked as needing a new type. Episodes without a usable label
    and "not a failure" are counted under excluded, with their reasons.
    """
    choice = version_choice(study, version)
    axes = version_axes(study, choice)
    labels = labels or version_labels(study, choice, axes)
    covered: Counter = Counter()
    new: Counter = Counter()
    excluded: Counter = Counter()
    new_episodes = []
    for e_id, kind, title, label in sorted(labels.holdout, key=lambda h: h[0]):
        if not label.usable:
            excluded[label.reason] += 1
        elif label.not_a_failure:
            excluded[NOT_A_FAILURE] += 1
        elif label.needs_new_type or label.failure_type_id is None:
            new[kind] += 1
            new_episodes.append({"id": e_id, "kind": kind, "title": title})
        else:
            covered[kind] += 1

    def section(k: int, n: int) -> dict:
        w = stats.wilson(k, n, level=level)
        return {
            "status": "ok" if w.enough else "not_enough_data",
            "reason": w.reason or ("" if n else "no hold-out episodes with a usable failure label"),
            "covered": k,
            "needs_new_type": n - k,
            "n": n,
            "value": _f(w.value),
            "ci_low": _f(w.low),
            "ci_high": _f(w.high),
        }

    total = section(sum(covered.values()), sum(covered.values()) + sum(new.values()))
    if not labels.holdout:
        total["reason"] = "the study has no hold-out episodes"
    return {
        "schema": "faultline.coverage/1",
        "study": {"slug": study.slug, "name": study.name},
        "parameters": {
            "level": level,
            "interval": "wilson",
            "codebook": axes.codebook,
            **_version_section(choice),
            "label_rule": study.label_rule,
            "label_coder": _label_coder(study),
        },
        "data": {"as_of": labels.as_of, "fingerprint": labels.fingerprint, "holdout": len(labels.holdout)},
        "coverage": total,
        "by_kind": [
            {"kind": kind, **section(covered[kind], covered[kind] + new[kind])}
            for kind in KINDS
            if covered[kind] or new[kind]
        ],
        "excluded": {"total": sum(excluded.values()), "by_reason": dict(sorted(excluded.items()))},
        "new_type_episodes": new_episodes,
        "generated_at": timezone.now().isoformat(),
    }
