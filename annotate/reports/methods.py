"""The methods paragraph of a report, written from the documents' own parameters, so every name, number and
setting in it is the one the numbers were computed with."""

from __future__ import annotations

from annotate.analysis.documents import KIND_LABELS


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _coding_sentences(data: dict) -> list[str]:
    s = data["study"]
    agreement = data["agreement"]
    k = s["coders_per_episode"]
    n_coders = len(agreement["coders"])
    codebook = data["analysis"]["parameters"]["codebook"]
    out = [
        f"Episodes were coded against the codebook {codebook} on four axes (responsibility source, failure type, "
        f"workflow stage and agent capability) by {n_coders} coder{'s' if n_coders != 1 else ''}, "
        f"with k = {k} coder{'s' if k != 1 else ''} per episode."
    ]
    versions = data["analysis"]["parameters"].get("codebook_versions") or [codebook]
    earlier = [v for v in versions if v != codebook]
    if earlier:
        out.append(
            f"The codebook was revised during coding: the study moved from {_join(earlier[::-1])} to {codebook} by "
            "a mapping of old codes to new ones (renamed and merged types moved, split and retired types were coded "
            f"again); every number here uses the labels under {codebook}, and episodes whose codes still await "
            "re-coding or re-adjudication are excluded and counted."
        )
    if s["blind"]:
        out.append("Coding was blind: a coder saw no other coder's codes of an episode before saving their own, "
                   "and suggestions, where shown, came from the tool, not from other coders.")  # fmt: skip
    else:
        out.append("Coding was not blind: coders could see each other's codes.")
    if s["label_rule"] == "single_coder":
        out.append(f"The analysed label of each episode is the code of one coder ({s['label_coder'] or 'unset'}).")
    else:
        out.append(
            "The analysed label of an episode is its adjudicated code where an adjudicator resolved a "
            "disagreement, otherwise the code all of its k coders agreed on; episodes whose coders disagreed and "
            f"that were not adjudicated are excluded and counted ({data['counts']['adjudicated']} episodes were "
            "adjudicated)."
        )
    return out


def _agreement_sentence(data: dict) -> str:
    p = data["agreement"]["parameters"]
    return (
        "Agreement between coders is reported per axis as observed agreement, Fleiss' κ, Krippendorff's α "
        "(nominal) and Gwet's AC1 (generalised to any number of coders, with chance agreement spread over every "
        "code the codebook offers on the axis), and per coder pair as Cohen's κ, Krippendorff's α and Gwet's AC1, "
        f"with {int(100 * p['level'])}% percentile intervals from B = {p['bootstrap']} bootstrap resamples of "
        f"episodes (seed {p['seed']}); at perfect or near-perfect agreement a one-sided Clopper-Pearson lower bound "
        "is given instead."
    )


def _analysis_sentences(data: dict) -> list[str]:
    doc = data["analysis"]
    p = doc["parameters"]
    level = int(100 * p["level"])
    out = [
        f"Shares of episodes by workflow stage × agent capability are estimated per document kind with "
        f"{level}% intervals by the method “{p['interval_name']}” (method id {p['interval']}); differences "
        f"between kinds use the {p['difference_interval']} cluster bootstrap ({p['resampling']}; B = "
        f"{p['bootstrap']}, seed {p['seed']}, blocks of {p['block']} replicates). Cells resting on fewer than "
        f"{p['min_clusters']} clusters with records are flagged."
    ]
    c = doc["contrast"]
    checks = [ch["description"][0].lower() + ch["description"][1:] for ch in c.get("sensitivity", [])]
    if checks:
        stages = {s["code"]: s["name"] for s in doc["axes"]["stages"]}
        caps = {s["code"]: s["name"] for s in doc["axes"]["capabilities"]}
        cell = f"{stages[c['cell']['stage']]} × {caps[c['cell']['capability']]}"
        out.append(
            f"The contrast {KIND_LABELS[c['a']]} − {KIND_LABELS[c['b']]} in {cell} was checked for sensitivity "
            f"({c.get('sensitivity_bootstrap')} replicates each): {_join(checks)}."
        )
    cov = data["coverage"]["coverage"]
    if cov["n"]:
        out.append(
            f"Coverage of the codebook is the share of {cov['n']} hold-out failures coded to an existing type, "
            f"with a Wilson {level}% interval."
        )
    return out


def methods_paragraph(data: dict, *, software: str) -> str:
    parts = [*_coding_sentences(data), _agreement_sentence(data), *_analysis_sentences(data)]
    parts.append(f"All numbers were computed with {software}; the bundle's provenance.json records the inputs, "
                 "and `manage.py reproduce` recomputes every table from the bundled export.")  # fmt: skip
    return " ".join(parts)
