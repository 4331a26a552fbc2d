"""Plain-text renderings of the analysis documents, for the management commands."""

from __future__ import annotations


def _pct(x) -> str:
    return "   -  " if x is None else f"{100 * x:5.1f}%"


def _ci(lo, hi) -> str:
    return "n/a" if lo is None or hi is None else f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"


def _table(doc: dict, grid: list[list], fmt) -> list[str]:
    caps = [c["code"][:6] for c in doc["axes"]["capabilities"]]
    lines = ["  " + "stage".ljust(22) + "".join(c.rjust(9) for c in caps)]
    for stage, row in zip(doc["axes"]["stages"], grid, strict=True):
        lines.append("  " + stage["code"][:22].ljust(22) + "".join(fmt(v).rjust(9) for v in row))
    return lines


def analysis_text(doc: dict) -> str:
    p = doc["parameters"]
    out = [
        f"Study {doc['study']['slug']} · codebook {p['codebook']} · label rule {p['label_rule']}"
        + (f" ({p['label_coder']})" if p["label_coder"] else ""),
        f"B={p['bootstrap']} seed={p['seed']} · {int(100 * p['level'])}% cell intervals: "
        f"{p.get('interval_name', p['interval'])} · differences: {p.get('difference_interval', p['interval'])} "
        f"bootstrap, {p['resampling']}",
        f"Data as of {doc['data']['as_of'] or '-'} · fingerprint {doc['data']['fingerprint'][:12]}",
        "",
    ]
    for kind in doc["kinds"]:
        head = f"{kind['label']}: {kind['n_episodes']} episodes in {kind['n_clusters']} clusters"
        if kind["status"] != "ok":
            out += [head + f" — not enough data ({kind['reason']})", ""]
            continue
        out.append(head)
        counts, props = kind["counts"], kind["proportions"]
        grid = [[(c, p_) for c, p_ in zip(cr, pr, strict=True)] for cr, pr in zip(counts, props, strict=True)]
        out += _table(doc, grid, lambda v: "." if v[0] == 0 else f"{v[0]} {100 * v[1]:.0f}%")
        few = sum(f for row in kind.get("few_clusters") or [] for f in row)
        if few:
            out.append(f"  {few} cells rest on fewer than {p.get('min_clusters', 5)} clusters with records: "
                       "read their intervals with care")  # fmt: skip
        out.append("")
    for diff in doc["differences"]:
        if diff["status"] != "ok":
            continue
        out.append(f"Difference {diff['a']} - {diff['b']} (percentage points; * interval excludes 0)")
        grid = [
            [(e, z) for e, z in zip(er, zr, strict=True)]
            for er, zr in zip(diff["estimate"], diff["excludes_zero"], strict=True)
        ]
        out += _table(doc, grid, lambda v: f"{100 * v[0]:+.1f}" + ("*" if v[1] else " "))
        out.append("")
    c = doc["contrast"]
    cell = f"{c['cell']['stage']} x {c['cell']['capability']}"
    out.append(f"Contrast {c['a']} - {c['b']} in {cell} ({c['cell_chosen'].replace('_', ' ')}):")
    if c["status"] != "ok":
        out.append(f"  not enough data ({c['reason']})")
    else:
        out.append(
            f"  {c['a_count']}/{c['a_n']} vs {c['b_count']}/{c['b_n']}: {100 * c['estimate']:+.1f} points, "
            f"CI {_ci(c['ci_low'], c['ci_high'])}" + (" excludes 0" if c["excludes_zero"] else " includes 0")
        )
        for check in c["sensitivity"]:
            if check["status"] != "ok":
                out.append(f"  - {check['description']}: not enough data ({check['reason']})")
                continue
            verdict = "keeps its sign" if check["keeps_sign"] else "CHANGES SIGN"
            verdict += ", excludes 0" if check["excludes_zero"] else ", includes 0"
            out.append(
                f"  - {check['description']}: {100 * check['estimate']:+.1f} "
                f"CI {_ci(check['ci_low'], check['ci_high'])} — {verdict}"
            )
    ex = doc["excluded"]
    reasons = ", ".join(f"{k} {v}" for k, v in ex["by_reason"].items()) or "none"
    out += ["", f"Excluded primary episodes: {ex['total']} ({reasons}); hold-out episodes not in matrices: "
            f"{ex['holdout_not_in_matrices']}"]  # fmt: skip
    return "\n".join(out)


def _est(e: dict) -> str:
    if e["value"] is None:
        return f"n/a ({e['reason']})"
    if e.get("one_sided"):
        ci = f" (one-sided lower bound >= {e['ci_low']:.3f}, Clopper-Pearson)"
    else:
        ci = "" if e["ci_low"] is None else f" [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"
    warning = f" — {e['warning']}" if e.get("warning") else ""
    return f"{e['value']:.3f}{ci}{warning}"


def agreement_text(doc: dict) -> str:
    p = doc["parameters"]
    out = [
        f"Study {doc['study']['slug']} · codebook {p['codebook']} · coders: {', '.join(doc['coders']) or '-'}",
        f"B={p['bootstrap']} seed={p['seed']}, {int(100 * p['level'])}% intervals resampling episodes",
        "",
    ]
    for axis in doc["axes"]:
        if axis["status"] != "ok":
            out.append(f"{axis['axis']}: not enough data ({axis['reason']})")
            continue
        out.append(
            f"{axis['axis']} ({axis['n_episodes']} episodes, {axis['n_ratings']} ratings, "
            f"AC1 over {axis['n_categories']} codebook categories)"
        )
        for key, label in (
            ("percent_agreement", "percent agreement"),
            ("fleiss_kappa", "Fleiss' kappa"),
            ("krippendorff_alpha", "Krippendorff's alpha"),
            ("gwet_ac1", "Gwet's AC1"),
        ):
            out.append(f"  {label:22} {_est(axis[key])}")
        for pair in axis["pairs"]:
            out.append(f"  {pair['a']} x {pair['b']} (n={pair['n']}): Cohen's kappa {_est(pair['cohen_kappa'])}")
    if doc["worst_types"]:
        out += ["", "Least agreed failure types (specific agreement):"]
        for t in doc["worst_types"]:
            out.append(f"  {t['code']:8} {t['specific_agreement']:.2f} over {t['ratings']} ratings  {t['name']}")
    out += attribution_text(doc.get("attribution"))
    return "\n".join(out)


def _prop(p: dict) -> str:
    if p["value"] is None:
        return f"- (n={p['n']})"
    return f"{100 * p['value']:.1f}% [{100 * p['ci_low']:.1f}, {100 * p['ci_high']:.1f}] ({p['k']}/{p['n']})"


def attribution_text(a: dict | None) -> list[str]:
    """Who and when: agreement on agent and step, accuracy against the reference (trace episodes only)."""
    if not a or not a["trace_episodes"]:
        return []
    agent, step = a["agreement"]["agent"], a["agreement"]["step"]
    out = ["", f"Attribution ({a['trace_episodes']} trace episodes)"]
    if agent["status"] == "ok":
        out.append(f"  responsible agent ({agent['n_episodes']} episodes): Fleiss' kappa {_est(agent['fleiss_kappa'])}"
                   f", Krippendorff's alpha {_est(agent['krippendorff_alpha'])}")  # fmt: skip
        for pair in agent["pairs"]:
            out.append(f"    {pair['a']} x {pair['b']} (n={pair['n']}): Cohen's kappa {_est(pair['cohen_kappa'])}")
    else:
        out.append(f"  responsible agent: not enough data ({agent['reason']})")
    if step["status"] == "ok":
        head = f"  decisive step ({step['n_episodes']} episodes, {step['n_pairs']} coder pairs)"
        out.append(f"{head}: exact {_est(step['exact'])}, ±1 {_est(step['within_1'])}, ±3 {_est(step['within_3'])}")
    else:
        out.append("  decisive step: not enough data (fewer than 2 episodes with steps from two coders)")
    ref = a["reference"]
    if ref["episodes"]:
        out.append(f"  accuracy against the reference ({ref['episodes']} episodes with one):")
        for r in ref["raters"]:
            s = r["step"]
            out.append(f"    {r['rater']:24} agent {_prop(r['agent'])} · step exact {_prop(s['exact'])}, "
                       f"±1 {_prop(s['within_1'])}, ±3 {_prop(s['within_3'])}")  # fmt: skip
    return out


def coverage_text(doc: dict) -> str:
    c = doc["coverage"]
    head = f"Study {doc['study']['slug']} · codebook {doc['parameters']['codebook']}"
    out = [f"{head} · {doc['data']['holdout']} hold-out episodes"]
    if c["status"] != "ok":
        out.append(f"Coverage: not enough data ({c['reason']})")
    else:
        out.append(
            f"Coverage: {c['covered']}/{c['n']} coded to an existing type = {100 * c['value']:.1f}% "
            f"(Wilson {int(100 * doc['parameters']['level'])}% CI {100 * c['ci_low']:.1f}-{100 * c['ci_high']:.1f}%); "
            f"{c['needs_new_type']} need a new type"
        )
    ex = doc["excluded"]
    out.append(f"Excluded: {ex['total']} ({', '.join(f'{k} {v}' for k, v in ex['by_reason'].items()) or 'none'})")
    for e in doc["new_type_episodes"]:
        out.append(f"  needs a new type: episode {e['id']} ({e['kind']}) {e['title']}")
    return "\n".join(out)
