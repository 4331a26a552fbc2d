"""Number formatting for the analysis pages: shares, percentage points and intervals."""

from __future__ import annotations

from django import template

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


@register.filter
def label(code: str) -> str:
    """iterative_execution → "iterative execution"."""
    return str(code).replace("_", " ")
