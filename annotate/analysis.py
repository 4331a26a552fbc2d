"""Analysis selectors: a study's labels as arrays, and the JSON documents built from them.

The arrays come from `annotate.labels` (`final_label_values`) (the one label rule, shared
with exports) in a fixed number of queries; every statistic is computed by the
pure functions of `lib.stats`. The documents returned here are what the
`analyze`, `agreement` and `coverage` commands print with `--json`, what the
API serves and what the pages render, so the three never disagree.

Nothing here writes to the database.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations, pairwise

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from annotate.attribution import attribution_document
from annotate.coding.labels import final_label_values, resolve_label
from annotate.models import Adjudication, Coding, Document, DocumentKind, Episode, Split, Study
from lib import stats
from lib.db.plans import serial_plans
from taxonomy.models import Axis, AxisValue, Category, FailureType

KINDS = tuple(DocumentKind.values)  # github_issue, literature, incident: the stream order of designs
KIND_LABELS = dict(DocumentKind.choices)
KIND_ALIASES = {"github": "github_issue", "gh": "github_issue", "issue": "github_issue", "lit": "literature"}
NOT_A_FAILURE = "not_a_failure"
NEEDS_NEW_TYPE = "needs_new_type"
HOLDOUT = "holdout"
LEVEL = 0.95
DEFAULT_B = 2000
AGREEMENT_B = 1000
MAX_B = 200_000  # keeps replicate counts near 35 MB per kind (int32)

ProgressFn = Callable[[int, int], None]


# ---------------------------------------------------------------------------
# The codebook's axes


@dataclass(frozen=True)
class Axes:
    """Codes and names of the codebook's axes, and id → index maps for the arrays."""

    codebook: str
    stages: tuple[tuple[str, str], ...]
    capabilities: tuple[tuple[str, str], ...]
    sources: tuple[tuple[str, str], ...]
    types: tuple[tuple[str, str], ...]
    categories: tuple[tuple[str, str], ...]
    type_category: tuple[int, ...]  # category index of each type
    index: dict = field(default_factory=dict)  # axis -> {id: index}

    def code(self, axis: str, i: int) -> str:
        return getattr(self, axis)[i][0]


def codebook_axes(study: Study) -> Axes:
    """The study codebook's axis values, categories and types (three queries)."""
    cb = study.codebook
    values: dict[str, list[AxisValue]] = {a: [] for a in Axis.values}
    for v in AxisValue.objects.filter(codebook=cb).order_by("axis", "order", "id"):
        values[v.axis].append(v)
    cats = list(Category.objects.filter(codebook=cb).order_by("order", "id"))
    types = list(FailureType.objects.filter(codebook=cb).order_by("order", "id"))
    cat_index = {c.id: i for i, c in enumerate(cats)}
    index = {axis: {v.id: i for i, v in enumerate(vals)} for axis, vals in values.items()}
    index["failure_type"] = {t.id: i for i, t in enumerate(types)}
    return Axes(
        codebook=cb.label,
        stages=tuple((v.code, v.name) for v in values[Axis.STAGE]),
        capabilities=tuple((v.code, v.name) for v in values[Axis.CAPABILITY]),
        sources=tuple((v.code, v.name) for v in values[Axis.SOURCE]),
        types=tuple((t.code, t.name) for t in types),
        categories=tuple((c.code, c.name) for c in cats),
        type_category=tuple(cat_index[t.category_id] for t in types),
        index=index,
    )


# ---------------------------------------------------------------------------
# Final labels as arrays


@dataclass(frozen=True, eq=False)
class LabelArrays:
    """One row per usable failure label (primary split), plus what was left out and why."""

    episode_id: np.ndarray
    kind: np.ndarray  # index into KINDS
    cluster: np.ndarray  # object array of names
    stage: np.ndarray
    capability: np.ndarray
    source: np.ndarray
    failure_type: np.ndarray  # -1: needs a new type
    category: np.ndarray
    excluded: dict  # kind -> Counter(reason)
    holdout: list  # (episode_id, kind, title, FinalLabel) for hold-out episodes
    n_episodes: int
    fingerprint: str
    as_of: str | None

    def of_kind(self, k: int) -> np.ndarray:
        return self.kind == k


def _idx(mapping: dict, key) -> int:
    return mapping.get(key, -1) if key is not None else -1


def label_arrays(study: Study, axes: Axes | None = None) -> LabelArrays:
    """The study's final labels under its label rule, as arrays (a fixed number of queries).

    Primary episodes with a usable failure label become rows. Every other
    primary episode is counted under its reason (uncoded, incomplete,
    disagreement, not_a_failure, ...). Hold-out episodes never become rows;
    their labels are kept for the coverage document.
    """
    axes = axes or codebook_axes(study)
    return labels_join(study, [label_part(study, axes, ids=ids) for ids in label_id_ranges(study, 1)])


def label_id_ranges(study: Study, parts: int) -> list[tuple[int, int]]:
    """Episode id ranges [lo, hi) that cover the study in `parts` pieces, for reading its labels in parallel."""
    bounds = Episode.objects.filter(study=study).aggregate(lo=Min("id"), hi=Max("id"))
    if bounds["lo"] is None:
        return [(0, 1)]
    lo, hi = bounds["lo"], bounds["hi"] + 1
    parts = max(1, min(parts, hi - lo))
    edges = [lo + (hi - lo) * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in pairwise(edges) if b > a]


LABEL_CHUNK = 5000  # touched episodes read per query


def _touched(lo: int, hi: int) -> Q:
    """Episodes in [lo, hi) that somebody has coded or adjudicated, looked up among the codings and
    adjudications of that id range alone (an index range scan). Not an OR of two EXISTS: PostgreSQL
    cannot make that a join, and hashed the whole coding table, every study's, for each query."""
    in_range = {"episode_id__gte": lo, "episode_id__lt": hi}
    return Q(id__in=Coding.objects.filter(**in_range).values("episode_id")) | Q(
        id__in=Adjudication.objects.filter(**in_range).values("episode_id")
    )


def _touched_ranges(lo: int, hi: int, chunk: int) -> list[tuple[int, int]]:
    """Ranges [a, b) that split the touched episode ids in [lo, hi) (any study's) into runs of at most
    `chunk`: each query of a part then looks up only its own range's codings (two queries)."""
    in_range = {"episode_id__gte": lo, "episode_id__lt": hi}
    ids = set(Coding.objects.filter(**in_range).order_by().values_list("episode_id", flat=True).distinct())
    ids.update(Adjudication.objects.filter(**in_range).values_list("episode_id", flat=True))
    ids = sorted(ids)
    return [(ids[i], ids[min(i + chunk, len(ids)) - 1] + 1) for i in range(0, len(ids), chunk)]


def label_part(study: Study, axes: Axes, *, ids: tuple[int, int]) -> LabelArrays:
    """The labels of the study's episodes with ids in [lo, hi); `labels_join` makes the study's arrays of
    the parts (label_id_ranges gives ranges that cover it). A part has no fingerprint and no as_of."""
    with serial_plans():
        return _label_part(study, axes, ids)


def _label_part(study: Study, axes: Axes, ids: tuple[int, int]) -> LabelArrays:
    lo, hi = ids
    episodes = Episode.objects.filter(study=study, id__gte=lo, id__lt=hi)
    fields = ("id", "split", "document__kind", "document__cluster", "document__title")
    kind_index = {k: i for i, k in enumerate(KINDS)}
    rows: list[tuple] = []
    excluded: dict[str, Counter] = {k: Counter() for k in KINDS}
    holdout = []
    # Episodes nobody has coded or adjudicated have a known label; they are counted by the
    # database, not read one by one (most of a large study's episodes, usually).
    n = _untouched_labels(study, episodes.exclude(_touched(lo, hi)), excluded, holdout)
    touched = (
        ((e_id, split, kind, cluster, title), label)
        for a, b in _touched_ranges(lo, hi, LABEL_CHUNK)
        for (e_id, split, kind, cluster, title), label in final_label_values(
            study, episodes.filter(_touched(a, b), id__gte=a, id__lt=b), fields, chunk=LABEL_CHUNK
        )
    )
    ix = axes.index
    for (e_id, split, kind, cluster, title), label in touched:
        n += 1
        if split == Split.HOLDOUT:
            holdout.append((e_id, kind, title, label))
            continue
        if split == Split.EXCLUDED:
            excluded[kind]["excluded by an owner"] += 1
            continue
        if not label.usable:
            excluded[kind][label.reason] += 1
            continue
        if label.not_a_failure:
            excluded[kind][NOT_A_FAILURE] += 1
            continue
        t = _idx(ix["failure_type"], label.failure_type_id)
        rows.append(
            (
                e_id,
                kind_index[kind],
                cluster,
                _idx(ix[Axis.STAGE], label.stage_id),
                _idx(ix[Axis.CAPABILITY], label.capability_id),
                _idx(ix[Axis.SOURCE], label.source_id),
                t,
                axes.type_category[t] if t >= 0 else -1,
            )
        )
    rows.sort()
    cols = list(zip(*rows, strict=True)) if rows else [()] * 8
    ints = [np.asarray(c, dtype=np.int64) for c in (cols[0], cols[1], cols[3], cols[4], cols[5], cols[6], cols[7])]
    return LabelArrays(
        episode_id=ints[0],
        kind=ints[1],
        cluster=np.asarray(cols[2], dtype=object),
        stage=ints[2],
        capability=ints[3],
        source=ints[4],
        failure_type=ints[5],
        category=ints[6],
        excluded=excluded,
        holdout=holdout,
        n_episodes=n,
        fingerprint="",
        as_of=None,
    )


def labels_join(study: Study, parts: list[LabelArrays]) -> LabelArrays:
    """The study's label arrays from parts that together cover its episodes once: rows in episode id order,
    reasons counted in sorted order, so any split into parts gives the same arrays and fingerprint."""
    order = np.argsort(np.concatenate([p.episode_id for p in parts]), kind="stable")
    names = ("episode_id", "kind", "stage", "capability", "source", "failure_type", "category")
    ints = {name: np.concatenate([getattr(p, name) for p in parts])[order] for name in names}
    cluster = np.concatenate([p.cluster for p in parts])[order] if parts else np.asarray([], dtype=object)
    cluster = np.asarray(cluster, dtype=object)
    totals: dict[str, Counter] = {k: Counter() for k in KINDS}
    for p in parts:
        for kind in KINDS:
            totals[kind].update(p.excluded.get(kind, {}))
    excluded = {kind: Counter(dict(sorted(totals[kind].items()))) for kind in KINDS}
    holdout = sorted((h for p in parts for h in p.holdout), key=lambda h: h[0])
    digest = hashlib.sha256()
    for name in names:
        digest.update(ints[name].tobytes())
    digest.update("\x1f".join(cluster.tolist()).encode())
    for e_id, kind, _, label in holdout:
        digest.update(f"{e_id}:{kind}:{label}".encode())
    for kind in KINDS:
        digest.update(repr(sorted(excluded[kind].items())).encode())
    return LabelArrays(
        **ints,
        cluster=cluster,
        excluded=excluded,
        holdout=holdout,
        n_episodes=sum(p.n_episodes for p in parts),
        fingerprint=digest.hexdigest(),
        as_of=_as_of(study),
    )


def _untouched_labels(study: Study, untouched, excluded: dict[str, Counter], holdout: list) -> int:
    """Count the episodes without codings or adjudication where `label_arrays` would put them; return how many."""
    empty = resolve_label(adjudication=None, codings=[], k=study.coders_per_episode, rule=study.label_rule,
                          label_coder_id=study.label_coder_id)  # fmt: skip
    n = 0
    for kind, split, count in untouched.order_by().values_list("document__kind", "split").annotate(c=Count("id")):
        n += count
        if split == Split.EXCLUDED:
            excluded[kind]["excluded by an owner"] += count
        elif split != Split.HOLDOUT:
            excluded[kind][empty.reason] += count
    held_out = untouched.filter(split=Split.HOLDOUT).values_list("id", "document__kind", "document__title")
    holdout += [(e_id, kind, title, empty) for e_id, kind, title in held_out]
    return n


def _as_of(study: Study) -> str | None:
    """When the study's labels last changed: the latest coding, adjudication or document update."""
    stamps = [
        Coding.objects.filter(episode__study=study).aggregate(m=Max("updated_at"))["m"],
        Adjudication.objects.filter(episode__study=study).aggregate(m=Max("updated_at"))["m"],
        Document.objects.filter(study=study).aggregate(m=Max("updated_at"))["m"],
    ]
    stamps = [s for s in stamps if s is not None]
    return max(stamps).isoformat() if stamps else None


def cell_index(axes: Axes, stage: int, capability: int) -> int:
    return stage * len(axes.capabilities) + capability


def designs(labels: LabelArrays, axes: Axes) -> list[stats.ClusterDesign]:
    """One cluster design per kind, in KINDS order."""
    K = len(axes.stages) * len(axes.capabilities)
    ok = (labels.stage >= 0) & (labels.capability >= 0)
    cells = labels.stage * len(axes.capabilities) + labels.capability
    return [
        stats.cluster_design(cells[m], labels.cluster[m], K)
        for m in ((labels.kind == i) & ok for i in range(len(KINDS)))
    ]


# ---------------------------------------------------------------------------
# Parameters


class ParameterError(ValueError):
    """Bad analysis parameters, as field errors ({field: [message]})."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class Params:
    bootstrap: int = DEFAULT_B
    seed: int = 0
    cell: tuple[int, int] | None = None  # stage, capability indices; None: the cell with the largest difference
    contrast: tuple[str, str] = ("github_issue", "literature")
    cap: int = 5
    subsamples: int = 20
    bca: bool = False  # BCa for cells and differences; the old spelling of interval="bca"
    level: float = LEVEL
    interval: str = stats.DEFAULT_CELL_METHOD  # the cell-share interval, one of stats.CELL_METHODS

    @property
    def diff_bca(self) -> bool:
        """Differences are always bootstrapped: BCa when asked for, percentile otherwise."""
        return self.bca or self.interval == "bca"


def _kind(name: str) -> str:
    name = name.strip().lower()
    return KIND_ALIASES.get(name, name)


def parse_params(
    axes: Axes,
    *,
    bootstrap=None,
    seed=None,
    cell: str | None = None,
    contrast: str | None = None,
    cap=None,
    bca=None,
    interval: str | None = None,
    max_bootstrap: int = MAX_B,
) -> Params:
    """Validate raw parameters (from a command line, a query string or job params)."""
    errors: dict[str, list[str]] = {}

    def integer(name, raw, default, low, high):
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except (TypeError, ValueError):
            errors[name] = ["Enter a whole number."]
            return default
        if not low <= value <= high:
            errors[name] = [f"Must be between {low:,} and {high:,}."]
        return value

    b = integer("bootstrap", bootstrap, DEFAULT_B, 100, max_bootstrap)
    s = integer("seed", seed, 0, 0, 2**32 - 1)
    m = integer("cap", cap, 5, 1, 10_000)
    parsed_cell = None
    if cell:
        stage, sep, capability = cell.partition(":")
        stages = [c for c, _ in axes.stages]
        caps = [c for c, _ in axes.capabilities]
        if not sep or stage not in stages or capability not in caps:
            errors["cell"] = [f"Give STAGE:CAPABILITY with codes of {axes.codebook}, e.g. {stages[0]}:{caps[0]}."]
        else:
            parsed_cell = (stages.index(stage), caps.index(capability))
    pair = ("github_issue", "literature")
    if contrast:
        a, sep, b_ = contrast.partition("-")
        a, b_ = _kind(a), _kind(b_)
        if not sep or a not in KINDS or b_ not in KINDS or a == b_:
            errors["contrast"] = [f"Give KIND_A-KIND_B with two different kinds of {', '.join(KINDS)}."]
        else:
            pair = (a, b_)
    flag = False
    if bca not in (None, ""):
        if str(bca).lower() in {"1", "true", "yes", "on"}:
            flag = True
        elif str(bca).lower() not in {"0", "false", "no", "off"}:
            errors["bca"] = ["Must be true or false."]
    method = "bca" if flag else stats.DEFAULT_CELL_METHOD
    if interval not in (None, ""):
        if interval not in stats.CELL_METHODS:
            errors["interval"] = [f"Choose one of {', '.join(stats.CELL_METHODS)}."]
        elif flag and interval != "bca":
            errors["bca"] = ["BCa and another interval method cannot both be asked for."]
        else:
            method = interval
    if errors:
        raise ParameterError(errors)
    return Params(bootstrap=b, seed=s, cell=parsed_cell, contrast=pair, cap=m, bca=flag, interval=method)


# ---------------------------------------------------------------------------
# Replicates: computed here, or in chunks by Celery workers


def compute_replicates(
    ds: list[stats.ClusterDesign], p: Params, *, progress: ProgressFn | None = None
) -> list[np.ndarray]:
    return stats.replicate_blocks(ds, B=p.bootstrap, seed=p.seed, progress=progress)


def pack(arrays: list[np.ndarray]) -> list[dict]:
    """Replicate counts as JSON-safe compressed blobs (for Celery results)."""
    return [
        {"shape": list(a.shape), "data": base64.b64encode(zlib.compress(a.astype(np.int32).tobytes(), 6)).decode()}
        for a in arrays
    ]


def unpack(blobs: list[dict]) -> list[np.ndarray]:
    return [
        np.frombuffer(zlib.decompress(base64.b64decode(b["data"])), dtype=np.int32).reshape(b["shape"]).copy()
        for b in blobs
    ]


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
        "clusters_with_records": _grid(boot.clusters_with_records, shape, as_int=True),
        "few_clusters": _flags(boot.few_clusters, shape),
        "n_eff": _grid(boot.n_eff, shape) if boot.enough else None,
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
    axes = axes or codebook_axes(study)
    p = params or Params()
    labels = labels or label_arrays(study, axes)
    ds = designs(labels, axes)
    reps = replicates if replicates is not None else compute_replicates(ds, p, progress=progress)
    boots = [stats.cell_intervals(d, r, level=p.level, method=p.interval) for d, r in zip(ds, reps, strict=True)]
    diffs = {
        (a, b): stats.diff_intervals(
            ds[a], ds[b], reps[a], reps[b], level=p.level, bca=p.diff_bca, names=(KINDS[a], KINDS[b])
        )
        for a, b in combinations(range(len(KINDS)), 2)
    }
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
    excluded = Counter()
    for kind in KINDS:
        excluded.update(labels.excluded[kind])
    return {
        "schema": "faultline.analysis/1",
        "study": {"slug": study.slug, "name": study.name},
        "parameters": {
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
        },
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


def _label_coder(study: Study) -> str | None:
    if study.label_coder_id is None:
        return None
    return get_user_model().objects.filter(pk=study.label_coder_id).values_list("username", flat=True).first()


# ---------------------------------------------------------------------------
# Episodes of one cell (the heatmap's click-through)


def cell_episodes(study: Study, kind: str, stage: str, capability: str, *, after: int = 0, limit: int = 200):
    """One page of the primary episodes whose final label falls in (kind, stage, capability), in id order
    after the keyset cursor `after` (an episode id), with their documents and the next page's cursor."""
    axes = codebook_axes(study)
    labels = label_arrays(study, axes)
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
# Agreement between coders

AGREEMENT_AXES = ("failure_type", "category", "source", "stage", "capability", "overall")


@dataclass(frozen=True, eq=False)
class CoderArrays:
    """Every coding of the study as units x coders code matrices, one per axis."""

    episode_id: np.ndarray
    coders: tuple[tuple[int, str], ...]  # (user id, username), sorted by id
    codes: dict  # axis -> U x R int matrix, -1 where the coder did not code the episode
    categories: dict  # axis -> tuple of category codes (index = code value)


def coder_arrays(study: Study, axes: Axes | None = None) -> CoderArrays:
    """All codings of the study's episodes (all splits) in two queries after the codebook's."""
    axes = axes or codebook_axes(study)
    rows = sorted(
        Coding.objects.filter(episode__study=study).values_list(
            "episode_id", "coder_id", "failure_type_id", "source_id", "stage_id", "capability_id",
            "not_a_failure", "needs_new_type",
        )
    )  # fmt: skip
    coder_ids = sorted({r[1] for r in rows})
    names = dict(get_user_model().objects.filter(pk__in=coder_ids).values_list("pk", "username"))
    episodes = sorted({r[0] for r in rows})
    u_index = {e: i for i, e in enumerate(episodes)}
    c_index = {c: i for i, c in enumerate(coder_ids)}
    U, R = len(episodes), len(coder_ids)
    ix = axes.index
    cats = {
        "failure_type": (*tuple(c for c, _ in axes.types), NEEDS_NEW_TYPE, NOT_A_FAILURE),
        "category": (*tuple(c for c, _ in axes.categories), NEEDS_NEW_TYPE, NOT_A_FAILURE),
        "source": (*tuple(c for c, _ in axes.sources), NOT_A_FAILURE),
        "stage": (*tuple(c for c, _ in axes.stages), NOT_A_FAILURE),
        "capability": (*tuple(c for c, _ in axes.capabilities), NOT_A_FAILURE),
    }
    codes = {a: np.full((U, R), -1, dtype=np.int64) for a in AGREEMENT_AXES}
    combos: dict[tuple, int] = {}
    for e, c, ft, src, stg, cap, naf, new in rows:
        u, r = u_index[e], c_index[c]
        if naf:
            vals = {a: len(cats[a]) - 1 for a in cats}
        else:
            t = _idx(ix["failure_type"], ft)
            vals = {
                "failure_type": len(axes.types) if new or t < 0 else t,
                "category": len(axes.categories) if new or t < 0 else axes.type_category[t],
                "source": _idx(ix[Axis.SOURCE], src),
                "stage": _idx(ix[Axis.STAGE], stg),
                "capability": _idx(ix[Axis.CAPABILITY], cap),
            }
        for a, v in vals.items():
            codes[a][u, r] = v
        key = tuple(vals[a] for a in ("failure_type", "source", "stage", "capability"))
        codes["overall"][u, r] = combos.setdefault(key, len(combos))
    # Number whole labels by their codes, and order episodes by what the coders gave them, so the
    # result (intervals included) does not depend on ids or insertion order.
    keys = sorted(combos)
    remap = np.array([keys.index(k) for k in combos] + [-1], dtype=np.int64)
    codes["overall"] = remap[codes["overall"]]
    cats["overall"] = tuple(
        "/".join(cats[a][v] for a, v in zip(("failure_type", "source", "stage", "capability"), key, strict=True))
        for key in keys
    )
    if U:
        order = np.lexsort(np.hstack([codes[a] for a in AGREEMENT_AXES]).T[::-1])
        codes = {a: c[order] for a, c in codes.items()}
        episodes = [episodes[i] for i in order]
    return CoderArrays(
        episode_id=np.asarray(episodes, dtype=np.int64),
        coders=tuple((c, names.get(c, str(c))) for c in coder_ids),
        codes=codes,
        categories=cats,
    )


def _est(e: stats.Estimate) -> dict:
    return {
        "value": _f(e.value),
        "ci_low": _f(e.low),
        "ci_high": _f(e.high),
        "reason": e.reason,
        "interval": e.method,
        "one_sided": e.one_sided,
        "undefined_share": _f(e.undefined_share),
        "warning": e.warning,
    }


def chance_categories(axes: Axes) -> dict[str, int]:
    """The codebook's categories per agreement axis: what AC1 spreads chance agreement over.

    Every axis counts what a coder can choose, used or not: its codebook
    values plus "not a failure" (and "needs a new type" for failure types and
    categories). `overall` compares whole labels, so it counts every
    combination a coder could give: (types + 1) x sources x stages x
    capabilities, plus "not a failure".
    """
    sizes = {
        "failure_type": len(axes.types) + 2,
        "category": len(axes.categories) + 2,
        "source": len(axes.sources) + 1,
        "stage": len(axes.stages) + 1,
        "capability": len(axes.capabilities) + 1,
    }
    whole = (len(axes.types) + 1) * len(axes.sources) * len(axes.stages) * len(axes.capabilities) + 1
    return {**sizes, "overall": max(whole, 2)}


def _confusion(m: np.ndarray, labels: tuple[str, ...]) -> dict:
    used = np.flatnonzero(m.sum(axis=0) + m.sum(axis=1))
    return {"labels": [labels[i] for i in used], "matrix": m[np.ix_(used, used)].astype(int).tolist()}


def agreement_document(study: Study, *, bootstrap: int = AGREEMENT_B, seed: int = 0, level: float = LEVEL) -> dict:
    """Agreement per axis and overall, per coder pair, with bootstrap intervals over episodes."""
    axes = codebook_axes(study)
    arr = coder_arrays(study, axes)
    out_axes = []
    worst = []
    chance = chance_categories(axes)
    for axis in AGREEMENT_AXES:
        labels = arr.categories[axis]
        Qc = max(chance[axis], len(labels))
        res = stats.agreement(
            arr.codes[axis], max(len(labels), 1), B=bootstrap, seed=seed, level=level, chance_categories=Qc
        )
        out_axes.append(
            {
                "axis": axis,
                "status": "ok" if res.enough else "not_enough_data",
                "reason": res.reason,
                "n_episodes": res.n_units,
                "n_ratings": res.n_ratings,
                "n_categories": Qc,
                "categories_used": int(np.unique(arr.codes[axis][arr.codes[axis] >= 0]).size),
                "n_rated": res.n_rated,
                "disagreeing": res.disagreeing,
                "percent_agreement": _est(res.percent),
                "fleiss_kappa": _est(res.fleiss_kappa),
                "krippendorff_alpha": _est(res.krippendorff_alpha),
                "gwet_ac1": _est(res.gwet_ac1),
                "pairs": [
                    {
                        "a": arr.coders[pr.coder_a][1],
                        "b": arr.coders[pr.coder_b][1],
                        "n": pr.n,
                        "percent_agreement": _est(pr.percent),
                        "cohen_kappa": _est(pr.kappa),
                        "confusion": _confusion(pr.confusion, labels + ("",) * (pr.confusion.shape[0] - len(labels))),
                    }
                    for pr in res.pairs
                ],
            }
        )
        if axis == "failure_type" and res.enough:
            names = dict(axes.types) | {NEEDS_NEW_TYPE: "Needs a new type", NOT_A_FAILURE: "Not a failure"}
            order = np.lexsort((-res.specific_n, res.specific))
            worst = [
                {
                    "code": labels[i],
                    "name": names.get(labels[i], ""),
                    "specific_agreement": _f(res.specific[i]),
                    "ratings": int(res.specific_n[i]),
                }
                for i in order
                if 0 <= res.specific[i] < 1 and res.specific_n[i] >= 2
            ][:10]
    return {
        "schema": "faultline.agreement/1",
        "study": {"slug": study.slug, "name": study.name},
        "parameters": {
            "bootstrap": bootstrap,
            "seed": seed,
            "level": level,
            "resampling": "episodes with replacement",
            "codebook": axes.codebook,
            "episodes": "all splits; observed agreement uses episodes coded by two or more coders, chance "
            "agreement every coded episode (Gwet's generalised formulas)",
            "interval": "percentile; one-sided clopper_pearson_one_sided lower bound at perfect or near-perfect "
            "agreement",
            "undefined_warn": stats.UNDEFINED_WARN,
            "ac1_categories": "the codebook's categories for the axis (n_categories)",
        },
        "coders": [name for _, name in arr.coders],
        "axes": out_axes,
        "worst_types": worst,
        "attribution": attribution_document(study, bootstrap=bootstrap, seed=seed, level=level),
        "generated_at": timezone.now().isoformat(),
    }


# ---------------------------------------------------------------------------
# Hold-out coverage


def coverage_document(study: Study, *, level: float = LEVEL, labels: LabelArrays | None = None) -> dict:
    """The share of hold-out episodes coded to an existing type, with a Wilson interval.

    The denominator is hold-out failures with a usable label: coded to a type
    (covered) or marked as needing a new type. Episodes without a usable label
    and "not a failure" are counted under excluded, with their reasons.
    """
    axes = codebook_axes(study)
    labels = labels or label_arrays(study, axes)
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


def finished_bootstrap(study: Study, params: Params) -> dict | None:
    """The document of a finished "bootstrap" job with these parameters on the study's current labels, if any."""
    from annotate.models import Job, JobStatus

    axes = codebook_axes(study)
    fingerprint = label_arrays(study, axes).fingerprint
    jobs = Job.objects.filter(study=study, kind="bootstrap", status=JobStatus.SUCCESS).order_by("-finished_at")[:50]
    for job in jobs:
        doc = job.result or {}
        got, c = doc.get("parameters", {}), doc.get("contrast", {})
        same = (
            doc.get("data", {}).get("fingerprint") == fingerprint
            and got.get("bootstrap") == params.bootstrap
            and got.get("seed") == params.seed
            and got.get("interval") == params.interval
            and got.get("cap") == params.cap
            and (c.get("a"), c.get("b")) == params.contrast
            and (
                params.cell is None
                or c.get("cell")
                == {"stage": axes.stages[params.cell[0]][0], "capability": axes.capabilities[params.cell[1]][0]}
            )
            and (params.cell is not None or c.get("cell_chosen") == "largest_difference")
        )
        if same:
            return doc
    return None
