"""The report's tables, built from the documents `collect.report_documents` gathers.

A table is a grid of formatted strings: exactly what report.html, report.pdf, tables.tex and the CSV files show,
so `reproduce` can compare a recomputed report with a bundle cell by cell. Rows and columns are named by the
codebook's display names, never by codes; shares and differences are in percent (points), agreement statistics
with three decimals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from annotate.analysis.documents import KIND_LABELS

DAGGER = "†"  # the cell rests on fewer clusters with records than MIN_CLUSTERS
MARK = "◆"  # the difference's interval excludes zero
ONE_SIDED = "‡"  # the statistic's interval collapsed: its one-sided lower bound is in the row's bound column
BOUND_COLUMN = "One-sided lower bound"
# Tables built from data the dataset export does not carry: `reproduce` cannot recompute them, and the report and
# `reproduce` say why, table by table. Comparing what the export does carry of them (the latest suggestion's top-1
# type per episode) would give a different number for a bundle nobody changed, and call it a difference.
NOT_FROM_EXPORT = {
    "suggestions": "the export carries each episode's latest suggestion only (its top-1 type, confidence and "
    "review status): not the ranked candidates that top-3 accuracy needs, the suggested source, stage and "
    "capability, earlier suggestions, other models' suggestions of the same episode, failed ones, nor who "
    "rejected one, all of which this table counts",
    "exposure": "the export carries no exposure records: which arm each coding was made under (suggestion shown "
    "before or after the coder's first choice), the coder's choice before seeing it, and the seconds to save",
    "attribution": "the export carries no trace attribution (each coder's responsible agent and decisive step of "
    "a trace episode) nor the traces' reference attribution",
}
AXIS_TITLES = {
    "failure_type": "Failure type", "category": "Category", "source": "Responsibility source",
    "stage": "Workflow stage", "capability": "Agent capability", "overall": "Whole label",
}  # fmt: skip


@dataclass(frozen=True)
class Table:
    key: str  # file name stem of its CSV, and its id in report.html
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = field(default=())
    totals: int = 0  # how many of the last rows are totals (ruled off)

    @property
    def from_export(self) -> bool:
        return self.key not in NOT_FROM_EXPORT

    @property
    def not_verified_because(self) -> str:
        """Why `reproduce` does not recompute this table ("" when it does)."""
        return NOT_FROM_EXPORT.get(self.key, "")


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def interval(lo: float | None, hi: float | None, *, signed: bool = False) -> str:
    if lo is None or hi is None:
        return "n/a"
    f = "+.1f" if signed else ".1f"
    return f"[{100 * lo:{f}}, {100 * hi:{f}}]"


def stat(e: dict | None) -> str:
    """An agreement statistic with its two-sided interval. A one-sided lower bound is never written as if it
    were an interval, nor inline: the value is marked ONE_SIDED and the bound goes to its row's own column
    (`bounds`), as on the agreement page."""
    if not e or e.get("value") is None:
        return "n/a"
    if e.get("one_sided"):
        return f"{e['value']:.3f} {ONE_SIDED}"
    if e.get("ci_low") is None:
        return f"{e['value']:.3f}"
    return f"{e['value']:.3f}\n[{e['ci_low']:.3f}, {e['ci_high']:.3f}]"


def bounds(stats: list[tuple[str, dict | None]]) -> str:
    """The one-sided lower bounds of a row's statistics (name, estimate), one a line; "–" when there are none."""
    lines = [f"{name} ≥ {e['ci_low']:.3f}" for name, e in stats
             if e and e.get("one_sided") and e.get("value") is not None]  # fmt: skip
    return ";\n".join(lines) or "–"


def share(s: dict | None) -> str:
    """A proportion with k/n and its interval (Wilson where the document says so)."""
    if not s or s.get("value") is None:
        return f"n/a (n={s.get('n', 0) if s else 0})"
    lo, hi = s.get("ci_low", s.get("low")), s.get("ci_high", s.get("high"))
    return f"{pct(s['value'])} {interval(lo, hi)} ({s['k']}/{s['n']})"


def version_note(doc: dict) -> str:
    """Which codebook version a table's numbers use: the study's labels under it."""
    p = doc["parameters"]
    others = [v for v in p.get("codebook_versions", []) if v != p["codebook"]]
    also = f" (the study also used {', '.join(others)})" if others else ""
    return f"Final labels under codebook {p['codebook']}{also}."


def _names(doc: dict) -> tuple[list[str], list[str]]:
    return [s["name"] for s in doc["axes"]["stages"]], [c["name"] for c in doc["axes"]["capabilities"]]


def counts_table(data: dict) -> Table:
    """Episodes in the matrices per kind (columns) by responsibility source (rows), with the excluded."""
    doc = data["analysis"]
    kinds = [k for k in doc["kinds"] if k["n_episodes"] or k["excluded"]]
    n_all = sum(k["n_episodes"] for k in kinds)
    sources = kinds[0]["distributions"]["source"] if kinds else []

    def cell(count: int, n: int) -> str:
        return f"{count} ({pct(count / n)})" if count else "0"

    rows = []
    for i, source in enumerate(sources):
        counts = [k["distributions"]["source"][i]["count"] for k in kinds]
        rows.append((source["name"], *(cell(c, k["n_episodes"]) for c, k in zip(counts, kinds, strict=True)),
                     cell(sum(counts), n_all)))  # fmt: skip
    rows.append(("In the matrices", *(str(k["n_episodes"]) for k in kinds), str(n_all)))
    excluded = [sum(k["excluded"].values()) for k in kinds]
    rows.append(("Excluded", *(str(e) for e in excluded), str(sum(excluded))))
    reasons = ", ".join(f"{r.replace('_', ' ')}: {v}" for r, v in doc["excluded"]["by_reason"].items()) or "none"
    return Table(
        "counts", "Episodes by responsibility source and document kind",
        ("Responsibility source", *(k["label"] for k in kinds), "All kinds"), tuple(rows),
        (f"Counts (share of the kind's episodes in the matrices). Excluded episodes by reason: {reasons}. "
         f"Hold-out episodes are kept out of the matrices: {doc['excluded']['holdout_not_in_matrices']}.",
         version_note(doc)),
        totals=2,
    )  # fmt: skip


def matrix_table(data: dict, section: dict) -> Table:
    doc = data["analysis"]
    stages, caps = _names(doc)
    p = doc["parameters"]
    rows = []
    for i, stage in enumerate(stages):
        cells = []
        for j in range(len(caps)):
            n = section["counts"][i][j]
            few = DAGGER if section["few_clusters"][i][j] else ""
            if section["ci_low"] is None:
                cells.append(f"{n}")
                continue
            share_ = section["proportions"][i][j]
            cells.append(f"{n} · {pct(share_)}\n{interval(section['ci_low'][i][j], section['ci_high'][i][j])}{few}")
        rows.append((stage, *cells, str(section["row_totals"][i])))
    rows.append(("Total", *(str(c) for c in section["col_totals"]), str(section["n_episodes"])))
    notes = [
        f"{section['n_episodes']} episodes in {section['n_clusters']} clusters (repositories or venues). "
        f"Cells: count · share of the kind's episodes, {int(100 * p['level'])}% interval in percent "
        f"({p['interval_name']}).",
        f"{DAGGER} fewer than {p['min_clusters']} clusters with records in the cell: read its interval with care.",
        version_note(doc),
    ]
    if section["status"] != "ok":
        notes.append(f"No intervals: {section['reason']}.")
    return Table(f"matrix-{section['kind']}", f"{section['label']}: workflow stage × agent capability",
                 ("Workflow stage \\ capability", *caps, "Total"), tuple(rows), tuple(notes), totals=1)  # fmt: skip


def difference_table(data: dict, diff: dict) -> Table:
    doc = data["analysis"]
    stages, caps = _names(doc)
    a, b = KIND_LABELS[diff["a"]], KIND_LABELS[diff["b"]]
    rows = []
    for i, stage in enumerate(stages):
        cells = []
        for j in range(len(caps)):
            est = diff["estimate"][i][j]
            mark = f" {MARK}" if diff["excludes_zero"][i][j] else ""
            few = DAGGER if diff["few_clusters"][i][j] else ""
            iv = interval(diff["ci_low"][i][j], diff["ci_high"][i][j], signed=True)
            cells.append(f"{100 * est:+.1f}{mark}\n{iv}{few}")
        rows.append((stage, *cells))
    level = int(100 * doc["parameters"]["level"])
    return Table(
        f"difference-{diff['a']}-{diff['b']}", f"Difference {a} − {b} by cell (percentage points)",
        ("Workflow stage \\ capability", *caps), tuple(rows),
        (f"{MARK} the {level}% {diff['interval']} cluster-bootstrap interval excludes 0; {DAGGER} few clusters.",
         version_note(doc)),
    )  # fmt: skip


def contrast_table(data: dict) -> Table | None:
    doc = data["analysis"]
    c = doc["contrast"]
    if c["status"] != "ok":
        return None
    stages = {s["code"]: s["name"] for s in doc["axes"]["stages"]}
    caps = {s["code"]: s["name"] for s in doc["axes"]["capabilities"]}
    a, b = KIND_LABELS[c["a"]], KIND_LABELS[c["b"]]
    level = int(100 * doc["parameters"]["level"])
    yes = lambda v: "n/a" if v is None else ("yes" if v else "no")  # noqa: E731
    rows = [(f"All data ({c['a_count']}/{c['a_n']} vs {c['b_count']}/{c['b_n']})", f"{100 * c['estimate']:+.1f}",
             interval(c["ci_low"], c["ci_high"], signed=True), "", yes(c["excludes_zero"]))]  # fmt: skip
    for check in c["sensitivity"]:
        if check["status"] != "ok":
            rows.append((check["description"], "n/a", "n/a", "n/a", f"not enough data: {check['reason']}"))
            continue
        rows.append((check["description"], f"{100 * check['estimate']:+.1f}",
                     interval(check["ci_low"], check["ci_high"], signed=True), yes(check["keeps_sign"]),
                     yes(check["excludes_zero"])))  # fmt: skip
    cell = f"{stages[c['cell']['stage']]} × {caps[c['cell']['capability']]}"
    chosen = "the cell with the largest difference" if c["cell_chosen"] == "largest_difference" else "chosen"
    return Table(
        "contrast", f"Contrast {a} − {b} in {cell}, with sensitivity checks",
        ("Analysis", "Difference (points)", f"{level}% interval", "Keeps sign", "Excludes 0"), tuple(rows),
        (f"Cell: {chosen}. Sensitivity checks use B = {c.get('sensitivity_bootstrap')} replicates.",
         version_note(doc)),
    )  # fmt: skip


def agreement_table(data: dict) -> Table:
    doc = data["agreement"]
    rows = []
    for axis in doc["axes"]:
        if axis["status"] != "ok":
            rows.append((AXIS_TITLES[axis["axis"]], str(axis["n_episodes"]), "n/a", "n/a", "n/a", "n/a", "–"))
            continue
        named = [("Agreement", axis["percent_agreement"]), ("κ", axis["fleiss_kappa"]),
                 ("α", axis["krippendorff_alpha"]), ("AC1", axis["gwet_ac1"])]  # fmt: skip
        rows.append((AXIS_TITLES[axis["axis"]], str(axis["n_episodes"]), *(stat(e) for _, e in named), bounds(named)))
    p = doc["parameters"]
    level = int(100 * p["level"])
    return Table(
        "agreement", f"Agreement between coders per axis ({doc['parameters']['codebook']})",
        ("Axis", "Episodes", "Agreement", "Fleiss' κ", "Krippendorff's α", "Gwet's AC1", BOUND_COLUMN), tuple(rows),
        (f"Each statistic with its two-sided {level}% percentile interval from B = {p['bootstrap']} bootstrap "
         f"resamples of episodes (seed {p['seed']}). {ONE_SIDED} the interval collapsed at perfect or near-perfect "
         f"agreement: the statistic's one-sided {level}% Clopper-Pearson lower bound is in the last column instead. "
         "Episodes coded by two or more coders.",),
    )  # fmt: skip


def pairs_table(data: dict) -> Table:
    cohen = {(a["axis"], p["a"], p["b"]): p for a in data["agreement"]["axes"] for p in a["pairs"]}
    rows = []
    for p in data["pairs"]:
        k = cohen.get((p["axis"], p["a"], p["b"]), {}).get("cohen_kappa")
        named = [("Agreement", p["percent"]), ("κ", k), ("α", p["alpha"]), ("AC1", p["ac1"])]
        rows.append((AXIS_TITLES[p["axis"]], f"{p['a']} ×\n{p['b']}", str(p["n"]), *(stat(e) for _, e in named),
                     bounds(named)))  # fmt: skip
    return Table(
        "agreement-pairs", "Agreement per coder pair",
        ("Axis", "Coders", "Episodes", "Agreement", "Cohen's κ", "Krippendorff's α", "Gwet's AC1", BOUND_COLUMN),
        tuple(rows),
        ("Over the episodes both coders coded; coders are named by the export's pseudonyms. "
         f"{ONE_SIDED} one-sided lower bound in the last column, as in the table above.",),
    )  # fmt: skip


def adjudication_table(data: dict) -> Table:
    counts = data["counts"]
    overall = next((a for a in data["agreement"]["axes"] if a["axis"] == "overall"), {})
    k = data["study"]["coders_per_episode"]
    rows = (
        ("Episodes", str(counts["episodes"])),
        ("Coded by at least one coder", str(counts["coded"])),
        (f"Coded by k = {k} or more coders", str(counts["complete"])),
        ("Coded by two or more coders and disagreeing on the whole label", str(overall.get("disagreeing", 0))),
        ("Adjudicated", str(counts["adjudicated"])),
        ("Hold-out episodes", str(counts["holdout"])),
    )
    return Table("adjudication", "Coding and adjudication", ("", "Episodes"), rows)


def coverage_table(data: dict) -> Table:
    doc = data["coverage"]

    def row(name: str, s: dict) -> tuple[str, ...]:
        return (name, str(s["covered"]), str(s["needs_new_type"]), str(s["n"]), pct(s["value"]),
                interval(s["ci_low"], s["ci_high"]))  # fmt: skip

    rows = [row(KIND_LABELS[s["kind"]], s) for s in doc["by_kind"]]
    rows.append(row("All hold-out", doc["coverage"]))
    level = int(100 * doc["parameters"]["level"])
    return Table(
        "coverage", "Hold-out coverage: hold-out failures coded to an existing type",
        ("Kind", "Covered", "Needs a new type", "n", "Coverage", f"{level}% interval (Wilson)"), tuple(rows),
        (*((doc["coverage"]["reason"],) if doc["coverage"]["reason"] else ()), version_note(doc)),
    )  # fmt: skip


def suggestions_table(data: dict) -> Table | None:
    q = data["suggestions"]
    if not q or not q["backends"]:
        return None
    rows = []
    for b in q["backends"]:
        acc = b["accuracy"].get("failure_type") or {}
        top = lambda x: "n/a" if x is None else pct(x)  # noqa: E731
        ece = "n/a" if b["ece"] is None else f"{b['ece']:.3f}"
        kappa = b["kappa_mean"].get("failure_type")
        rows.append((f"{b['backend']} · {b['model'] or '-'}", str(b["episodes"]), top(b["acceptance_rate"]),
                     f"{top(acc.get('top1'))} (n={acc.get('n', 0)})", top(acc.get("top3")), ece,
                     "n/a" if kappa is None else f"{kappa:.3f}"))  # fmt: skip
    return Table(
        "suggestions", "Suggestion quality per backend and model",
        ("Backend · model", "Episodes", "Accepted", "Top-1 type", "Top-3 type", "ECE", "Mean κ vs coders"),
        tuple(rows),
        (f"Against the final labels of {q['labelled_episodes']} episodes; accepted = share of reviewed "
         "suggestions accepted unchanged; ECE = expected calibration error of the top-1 confidence.",)
    )  # fmt: skip


def exposure_table(data: dict) -> Table | None:
    x = data["exposure"]
    if not x:
        return None
    rows = []
    for arm in x["arms"]:
        t = arm["time_to_save"]
        time = "n/a" if t["median_s"] is None else f"{t['median_s']:.1f}"
        if t["low_s"] is not None:
            time += f" [{t['low_s']:.1f}, {t['high_s']:.1f}]"
        rows.append((arm["arm"], str(arm["codings"]), str(arm["coders"]), share(arm["accuracy"]),
                     share(arm["agreement"]), time, share(arm["automation_bias"])))  # fmt: skip
    return Table(
        "exposure", "Exposure experiment: suggestions shown before or after the coder's first choice",
        ("Arm", "Codings", "Coders", "Accuracy", "Agreement", "Median seconds to save", "Automation bias"),
        tuple(rows), ("Shares with Wilson intervals; the median with a seeded percentile bootstrap interval.",)
    )  # fmt: skip


def attribution_table(data: dict) -> Table | None:
    a = data["agreement"].get("attribution")
    if not a or not a["trace_episodes"] or not a["reference"]["episodes"]:
        return None
    rows = [(r["rater"], share(r["agent"]), share(r["step"]["exact"]), share(r["step"]["within_1"]),
             share(r["step"]["within_3"])) for r in a["reference"]["raters"]]  # fmt: skip
    return Table(
        "attribution", "Trace attribution accuracy against the reference (who and when)",
        ("Rater", "Responsible agent", "Decisive step, exact", "Step ±1", "Step ±3"), tuple(rows),
        (a["reference"]["note"],),
    )  # fmt: skip


def report_tables(data: dict) -> list[Table]:
    doc = data["analysis"]
    tables = [counts_table(data)]
    tables += [matrix_table(data, k) for k in doc["kinds"] if k["n_episodes"]]
    tables += [difference_table(data, d) for d in doc["differences"] if d["status"] == "ok"]
    tables += [contrast_table(data), agreement_table(data), pairs_table(data), adjudication_table(data)]
    tables += [coverage_table(data), suggestions_table(data), exposure_table(data), attribution_table(data)]
    return [t for t in tables if t is not None]
