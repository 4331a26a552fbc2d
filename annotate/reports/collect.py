"""Everything a report shows, gathered from the public documents of annotate.analysis (the same the pages, the
API and the commands serve), plus per-pair α and AC1, adjudication counts, suggestion quality and the exposure
experiment. Coders are named as the dataset export names them, so a report and its bundle's export agree."""

from __future__ import annotations

from dataclasses import asdict
from itertools import combinations

import numpy as np

from annotate.analysis.arrays import Axes, codebook_axes
from annotate.analysis.coders import (
    AGREEMENT_AXES,
    AGREEMENT_B,
    CoderArrays,
    agreement_document,
    chance_categories,
    coder_arrays,
)
from annotate.analysis.documents import analysis_document, coverage_document
from annotate.analysis.params import Params
from annotate.coding.experiment import exposure_rows
from annotate.coding.exposure import exposure_report
from annotate.exports.rows import CoderNames
from annotate.models import Study, Suggestion
from annotate.studies.selectors import study_counts
from annotate.suggestions.quality import suggestion_quality
from lib import stats


def _est(e: stats.Estimate) -> dict:
    f = lambda x: None if x is None or not np.isfinite(x) else float(x)  # noqa: E731
    return {"value": f(e.value), "ci_low": f(e.low), "ci_high": f(e.high), "one_sided": e.one_sided,
            "reason": e.reason}  # fmt: skip


def pair_agreement(arr: CoderArrays, axes: Axes, *, bootstrap: int, seed: int, level: float,
                   names: CoderNames) -> list[dict]:  # fmt: skip
    """κ (Fleiss, equal to Scott's π for two coders), Krippendorff's α and Gwet's AC1 of every coder pair on
    every axis, over the episodes both coded, with the agreement document's bootstrap (lib.stats.agreement)."""
    chance = chance_categories(axes)
    out = []
    for axis in AGREEMENT_AXES:
        codes = arr.codes[axis]
        n_cat = max(len(arr.categories[axis]), 1)
        for i, j in combinations(range(len(arr.coders)), 2):
            both = (codes[:, i] >= 0) & (codes[:, j] >= 0)
            if both.sum() < 2:
                continue
            res = stats.agreement(codes[both][:, [i, j]], n_cat, B=bootstrap, seed=seed, level=level,
                                  chance_categories=max(chance[axis], n_cat))  # fmt: skip
            a, b = sorted((names(arr.coders[i][0]), names(arr.coders[j][0])))
            out.append({"axis": axis, "a": a, "b": b, "n": int(both.sum()), "percent": _est(res.percent),
                        "kappa": _est(res.fleiss_kappa), "alpha": _est(res.krippendorff_alpha),
                        "ac1": _est(res.gwet_ac1)})  # fmt: skip
    return sorted(out, key=lambda p: (AGREEMENT_AXES.index(p["axis"]), p["a"], p["b"]))


def _rename_coders(doc: dict, arr: CoderArrays, names: CoderNames) -> dict:
    """The agreement document names coders by username; the report uses the export's names."""
    arr_names = {username: names(pk) for pk, username in arr.coders}
    doc["coders"] = sorted(arr_names.get(c, c) for c in doc["coders"])
    for axis in doc["axes"]:
        for pair in axis["pairs"]:
            pair["a"], pair["b"] = sorted((arr_names.get(pair["a"], pair["a"]), arr_names.get(pair["b"], pair["b"])))
            pair.pop("confusion", None)
    for rater in (doc.get("attribution") or {}).get("reference", {}).get("raters", []):
        if rater["kind"] == "coder":
            rater["rater"] = arr_names.get(rater["rater"], rater["rater"])
    return doc


def report_documents(study: Study, params: Params, *, progress=None) -> dict:
    """The analysis, agreement and coverage documents and the rest a report shows, for one study.

    `progress(done, total)` counts the analysis bootstrap's blocks.
    """
    names = CoderNames(study)
    axes = codebook_axes(study)
    arr = coder_arrays(study, axes)
    analysis = analysis_document(study, params, axes=axes, progress=progress)
    agreement = _rename_coders(agreement_document(study, bootstrap=AGREEMENT_B, seed=params.seed), arr, names)
    pairs = pair_agreement(arr, axes, bootstrap=AGREEMENT_B, seed=params.seed, level=params.level, names=names)
    coverage = coverage_document(study, level=params.level)
    has_suggestions = Suggestion.objects.filter(episode__study=study).exists()
    quality = suggestion_quality(study).as_dict() if has_suggestions else None
    rows = exposure_rows(study)
    exposure = exposure_report(rows, seed=study.queue_seed).as_dict() if rows else None
    return {
        "study": {"slug": study.slug, "name": study.name, "blind": study.blind, "label_rule": study.label_rule,
                  "coders_per_episode": study.coders_per_episode,
                  "label_coder": names(study.label_coder_id) if study.label_coder_id else None},
        "analysis": analysis,
        "agreement": agreement,
        "pairs": pairs,
        "coverage": coverage,
        "counts": asdict(study_counts(study)),
        "suggestions": quality,
        "exposure": exposure,
        "agreement_bootstrap": AGREEMENT_B,
    }  # fmt: skip
