"""Agreement between coders as a document: each coder's codes as arrays, and the agreement statistics of
lib.stats over them (what the `agreement` command, the API and the agreement page show)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotate.analysis.arrays import NOT_A_FAILURE, Axes, _idx, codebook_axes
from annotate.analysis.attribution import attribution_document
from annotate.analysis.documents import NEEDS_NEW_TYPE, _f
from annotate.analysis.params import LEVEL
from annotate.coding.codebook_moves import codebook_versions, coding_rows_before
from annotate.models import Coding, Study
from lib import stats
from taxonomy.models import Axis

AGREEMENT_B = 1000


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


def coder_arrays(study: Study, axes: Axes | None = None, rows: list[tuple] | None = None) -> CoderArrays:
    """All codings of the study's episodes (all splits) in two queries after the codebook's.

    Codings a codebook migration queued again (recode_from) are left out until coded again.
    `rows`: the codings as they were under an earlier version (annotate.coding.codebook_moves),
    with `axes` of that version, instead of the study's codings now.
    """
    axes = axes or codebook_axes(study)
    if rows is None:
        rows = list(
            Coding.objects.filter(episode__study=study, recode_from__isnull=True).values_list(
                "episode_id", "coder_id", "failure_type_id", "source_id", "stage_id", "capability_id",
                "not_a_failure", "needs_new_type",
            )
        )  # fmt: skip
    rows = sorted(rows)
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
    # result (intervals included) does not depend on ids or insertion order. Each episode's codes are
    # sorted across coders first: the order of the coders' columns follows their user ids, which a study
    # loaded from its export (import_dataset, `reproduce`) does not keep; ties keep episode id order.
    keys = sorted(combos)
    rank = {k: i for i, k in enumerate(keys)}  # keys.index per label was quadratic in the distinct labels
    remap = np.array([rank[k] for k in combos] + [-1], dtype=np.int64)
    codes["overall"] = remap[codes["overall"]]
    cats["overall"] = tuple(
        "/".join(cats[a][v] for a, v in zip(("failure_type", "source", "stage", "capability"), key, strict=True))
        for key in keys
    )
    if U:
        order = np.lexsort(np.hstack([np.sort(codes[a], axis=1) for a in AGREEMENT_AXES]).T[::-1])
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


CONFUSION_LABELS = 30  # whole labels shown per coder pair: the most used; the others fold into one row and column


def _confusion(pair: stats.PairAgreement, labels: tuple[str, ...], *, limit: int | None = None) -> dict:
    """A pair's confusion matrix over the labels either coder used, from its non-zero cells.

    With `limit` (the overall axis, whose whole labels grow with the data: random codes give thousands), only
    the `limit` labels the pair used most are kept and the rest fold into one last row and column (`other`:
    how many labels it holds), so the stored document and the page stay bounded; every row, column and
    matrix total is unchanged, and `agreed` (the diagonal) and `labels_used` are of the whole matrix. Codebook
    axes are bounded by the codebook and kept whole.
    """
    a, b, n = pair.cells
    uses = np.bincount(a, weights=n, minlength=len(labels)) + np.bincount(b, weights=n, minlength=len(labels))
    used = np.flatnonzero(uses)
    out = {"agreed": int(n[a == b].sum()), "labels_used": int(used.size), "other": 0}
    if limit is not None and used.size > limit:
        keep = np.sort(used[np.lexsort((used, -uses[used]))[:limit]])
        out["other"] = int(used.size - limit)
    else:
        keep = used
    slot = np.full(len(labels), keep.size, dtype=np.int64)  # every label not kept goes to the last slot
    slot[keep] = np.arange(keep.size)
    size = keep.size + (1 if out["other"] else 0)
    m = np.zeros((size, size), dtype=np.int64)
    np.add.at(m, (slot[a], slot[b]), n)
    names = [labels[i] for i in keep] + ([f"{out['other']:,} other whole labels"] if out["other"] else [])
    return {"labels": names, "matrix": m.tolist(), **out}


def _version_arrays(study: Study, version: str | None) -> tuple[list, Axes, CoderArrays]:
    """The study's codebook versions, and the axes and coder arrays of the one asked for (None: now)."""
    versions = codebook_versions(study)
    chosen = next((v for v in versions if version in (v.label, v.version)), None)
    if version is not None and chosen is None:
        raise ValueError(f"the study never used codebook version {version!r}")
    if chosen is None or chosen.migration is None:
        axes = codebook_axes(study)
        return versions, axes, coder_arrays(study, axes)
    axes = codebook_axes(study, chosen.codebook)
    return versions, axes, coder_arrays(study, axes, coding_rows_before(chosen.migration))


def _pairs(res, arr, labels: tuple, axis: str) -> list[dict]:
    """Each coder pair's agreement and confusion (the overall axis's folded to its most-used labels)."""
    return [
        {
            "a": arr.coders[pr.coder_a][1],
            "b": arr.coders[pr.coder_b][1],
            "n": pr.n,
            "percent_agreement": _est(pr.percent),
            "cohen_kappa": _est(pr.kappa),
            "confusion": _confusion(
                pr,
                labels + ("",) * (pr.categories - len(labels)),
                limit=CONFUSION_LABELS if axis == "overall" else None,
            ),
        }
        for pr in res.pairs
    ]


def agreement_document(
    study: Study, *, bootstrap: int = AGREEMENT_B, seed: int = 0, level: float = LEVEL, version: str | None = None
) -> dict:
    """Agreement per axis and overall, per coder pair, with bootstrap intervals over episodes; `version`: an
    earlier codebook version of the study, with its codings as the migration away from it found them."""
    versions, axes, arr = _version_arrays(study, version)
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
                "pairs": _pairs(res, arr, labels, axis),
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
            "codebook_versions": [v.label for v in versions],
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
