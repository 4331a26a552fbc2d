"""Number formatting for the analysis pages: shares, percentage points and intervals."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

register = template.Library()
MISSING = "\u2013"  # an en dash for "no value"


@register.filter
def pct(value, digits: int = 1) -> str:
    """0.648 → "64.8%"; None → a dash."""
    if value is None or value == "":
        return MISSING
    return f"{100 * float(value):.{int(digits)}f}%"


@register.filter
def pp(value, digits: int = 1) -> str:
    """A difference of shares in signed percentage points: 0.484 → "+48.4"."""
    if value is None or value == "":
        return MISSING
    return f"{100 * float(value):+.{int(digits)}f}"


@register.filter
def num(value, digits: int = 3) -> str:
    if value is None or value == "":
        return MISSING
    return f"{float(value):.{int(digits)}f}"


@register.simple_tag
def interval(low, high, kind: str = "pct") -> str:
    """A bracketed interval in the same unit as its estimate, or an empty string."""
    if low is None or high is None:
        return ""
    fmt = {"pct": pct, "pp": pp, "num": num}[kind]
    return f"[{fmt(low)}, {fmt(high)}]"


ONE_SIDED_TITLE = (
    "One-sided lower bound: the bootstrap interval collapses at perfect or near-perfect agreement, so a "
    "Clopper-Pearson bound on the share of disagreeing episodes, carried through the chance correction, is shown"
)


@register.simple_tag
def estimate(e: dict, kind: str = "num", bounds: str = "inline") -> str:
    """An agreement estimate: value, its two-sided interval, why it is missing, and any warning.

    A one-sided lower bound is never written as if it were an interval: `bounds="inline"` writes
    it out as "≥ x (one-sided lower bound)"; `bounds="column"` (tables) marks the value with †
    and leaves the bound to the table's own column (one_sided_bounds).
    """
    fmt = {"pct": pct, "pp": pp, "num": num}[kind]
    if e.get("value") is None:
        return format_html('— <span class="muted">{}</span>', e.get("reason", ""))
    if e.get("one_sided") and bounds == "column":
        ci = format_html('<sup class="one-sided-mark" title="{}">†</sup>', ONE_SIDED_TITLE)
    elif e.get("one_sided"):
        ci = format_html(
            '<span class="one-sided" title="{}">≥ {} <span class="muted">(one-sided lower bound)</span></span>',
            ONE_SIDED_TITLE,
            fmt(e["ci_low"]),
        )
    elif e.get("ci_low") is not None:
        ci = format_html('<span class="muted ci">[{}, {}]</span>', fmt(e["ci_low"]), fmt(e["ci_high"]))
    else:
        ci = format_html('<span class="muted">{}</span>', e.get("reason", ""))
    warning = format_html(' <span class="warn" role="note">⚠ {}</span>', e["warning"]) if e.get("warning") else ""
    return format_html("{} {}{}", fmt(e["value"]), ci, warning)


@register.simple_tag
def one_sided_bounds(row: dict) -> str:
    """The one-sided lower bounds of an agreement row's statistics, for their own column ("" when none)."""
    stats = (("percent_agreement", "% agreement", pct), ("fleiss_kappa", "κ", num),
             ("krippendorff_alpha", "\u03b1", num), ("gwet_ac1", "AC1", num))  # fmt: skip
    parts = [
        format_html('<span class="one-sided">{} ≥ {}</span>', name, fmt(row[key]["ci_low"]))
        for key, name, fmt in stats
        if row.get(key, {}).get("one_sided") and row[key].get("value") is not None
    ]
    if not parts:
        return format_html('<span class="muted">{}</span>', MISSING)
    return format_html('<span class="one-sided-mark">†</span> {}', format_html(" ".join("{}" for _ in parts), *parts))


@register.filter
def label(code: str) -> str:
    """iterative_execution → "iterative execution"."""
    return str(code).replace("_", " ")


@register.filter
def get(mapping: dict, key: str):
    """mapping[key] in a template ({{ names|get:axis }}), None when missing."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def kind_label(kind: str) -> str:
    """github_issue → "GitHub issue": a document kind as readers know it."""
    from annotate.analysis.documents import KIND_LABELS

    return KIND_LABELS.get(kind, str(kind).replace("_", " "))


@register.filter
def axis_label(axis: str) -> str:
    """source → "Responsibility source", failure_type → "Failure type": an axis as the codebook names it."""
    from annotate.analysis.figures import AXIS_NAMES

    name = AXIS_NAMES.get(axis, str(axis).replace("_", " "))
    return name[:1].upper() + name[1:]


@register.inclusion_tag("annotate/partials/_step_rule_heldout.html")
def step_rule_heldout() -> dict:
    """The local step rule beside the position prior on held-out Who&When logs, from the one recorded place."""
    from annotate.suggestions.heldout import comparisons, record, verdict

    data = record()
    return {"verdict": verdict(data), "rows": comparisons(data), "logs": data.get("logs"),
            "halves": data.get("halves", {})}  # fmt: skip


@register.inclusion_tag("annotate/partials/_suggester_real_issues.html")
def suggester_real_issues() -> dict:
    """The local suggester beside the most common value on the real-issue test split, from the one recorded place."""
    from annotate.suggestions.real_issues import extras, record, rows, verdict

    data = record()
    return {"verdict": verdict(data), "rows": rows(data), "extras": extras(data), "n": data.get("n")}
