"""A study's final labels as arrays: the codebook's axes, the label arrays (read in parts of episode ids for
large studies, then joined), and the cluster designs the statistics draw from. The arrays come from
annotate.coding.labels (final_label_values), the one label rule, shared with exports."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
from django.db.models import Count, Max, Min, Q

from annotate.coding.labels import final_label_values, resolve_label
from annotate.models import Adjudication, Coding, Document, DocumentKind, Episode, Split, Study
from lib import stats
from lib.db.plans import serial_plans
from taxonomy.models import Axis, AxisValue, Category, Codebook, FailureType

KINDS = tuple(DocumentKind.values)  # github_issue, literature, incident: the stream order of designs
NOT_A_FAILURE = "not_a_failure"
HOLDOUT = "holdout"


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


_axes_cache: dict[tuple, Axes] = {}
_axes_lock = threading.Lock()


def codebook_axes(study: Study, codebook: Codebook | None = None) -> Axes:
    """The study codebook's axis values, categories and types (three queries; none for a published codebook
    read before by this process: published codebooks never change, as codebook_picker relies on too).
    `codebook`: an earlier version the study used (agreement per version, annotate.coding.codebook_moves)."""
    cb = codebook or study.codebook
    key = (cb.pk, cb.published_at) if cb.is_published else None
    with _axes_lock:
        cached = _axes_cache.get(key) if key is not None else None
    if cached is not None:
        return cached
    axes = _axes_build(cb)
    if key is not None:
        with _axes_lock:
            if len(_axes_cache) >= 16:
                _axes_cache.pop(next(iter(_axes_cache)))
            _axes_cache[key] = axes
    return axes


def _axes_build(cb) -> Axes:
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
LABEL_FIELDS = ("id", "split", "document__kind", "document__cluster", "document__title")


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
    excluded: dict[str, Counter] = {k: Counter() for k in KINDS}
    holdout: list = []
    touched = (
        ((e_id, split, kind, cluster, title), label)
        for a, b in _touched_ranges(lo, hi, LABEL_CHUNK)
        for (e_id, split, kind, cluster, title), label in final_label_values(
            study, episodes.filter(_touched(a, b), id__gte=a, id__lt=b), LABEL_FIELDS, chunk=LABEL_CHUNK
        )
    )
    n, rows, holdout, touched_by, touched_holdout = _collect(touched, axes, excluded, holdout)
    # Episodes nobody has coded or adjudicated have a known label; they are counted by the
    # database, not read one by one (most of a large study's episodes, usually).
    n += _untouched_labels(study, episodes, touched_by, touched_holdout, excluded, holdout)
    return _part(rows, excluded, holdout, n)


def _collect(touched, axes: Axes, excluded: dict[str, Counter], holdout: list):
    """Rows of the touched episodes' usable failure labels; the others counted under their reasons."""
    kind_index = {k: i for i, k in enumerate(KINDS)}
    rows: list[tuple] = []
    touched_by: Counter = Counter()  # (kind, split) -> touched episodes read
    touched_holdout: set[int] = set()
    n = 0
    ix = axes.index
    for (e_id, split, kind, cluster, title), label in touched:
        n += 1
        touched_by[(kind, split)] += 1
        if split == Split.HOLDOUT:
            touched_holdout.add(e_id)
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
    return n, rows, holdout, touched_by, touched_holdout


def _part(rows: list[tuple], excluded: dict[str, Counter], holdout: list, n: int) -> LabelArrays:
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


def _untouched_labels(
    study: Study, episodes, touched_by: Counter, touched_holdout: set[int], excluded: dict[str, Counter], holdout: list
) -> int:
    """Count the episodes without codings or adjudication where `label_arrays` would put them; return how many.

    They are all the episodes of the range less the touched ones just read, counted by (kind, split) in one
    GROUP BY: a NOT IN over the range's codings was planned by PostgreSQL, once those no longer fit work_mem, as
    a rescan of the codings per episode (minutes at a million episodes, 200,000 of them coded)."""
    empty = resolve_label(adjudication=None, codings=[], k=study.coders_per_episode, rule=study.label_rule,
                          label_coder_id=study.label_coder_id)  # fmt: skip
    n = 0
    for kind, split, count in episodes.order_by().values_list("document__kind", "split").annotate(c=Count("id")):
        count -= touched_by[(kind, split)]
        if count <= 0:
            continue
        n += count
        if split == Split.EXCLUDED:
            excluded[kind]["excluded by an owner"] += count
        elif split != Split.HOLDOUT:
            excluded[kind][empty.reason] += count
    held_out = episodes.filter(split=Split.HOLDOUT).values_list("id", "document__kind", "document__title")
    holdout += [(e_id, kind, title, empty) for e_id, kind, title in held_out if e_id not in touched_holdout]
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
