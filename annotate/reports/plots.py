"""The report's figures, drawn for one column of a two-column paper: 85 mm wide, no text under 7 pt at that
size, display names on the axes, axis titles, intervals drawn, colour-blind-safe colours (cividis for shares;
Okabe-Ito for the series, told apart by marker shape too). SVG keeps its text as text; PDF embeds TrueType.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable
from contextlib import contextmanager
from functools import partial
from itertools import pairwise

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from annotate.analysis.documents import KIND_LABELS

WIDTH_MM = 85
WIDTH_IN = WIDTH_MM / 25.4
MIN_PT = 7
# Okabe & Ito (2008), "Color universal design": distinguishable with every common colour-vision deficiency.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
SEQUENTIAL = "cividis_r"
STYLE = {
    "font.family": "DejaVu Sans", "font.size": 7.5, "axes.titlesize": 8, "axes.labelsize": 7.5,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "legend.fontsize": 7, "axes.linewidth": 0.6,
    "xtick.major.width": 0.6, "ytick.major.width": 0.6, "lines.linewidth": 1.0,
    "svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "faultline-report",
}  # fmt: skip


@contextmanager
def _style():
    with plt.rc_context(STYLE):
        yield


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _text_colour(rgba) -> str:
    r, g, b = rgba[:3]
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "#ffffff"


def matrix_figure(doc: dict, section: dict):
    """Shares of one kind's episodes by stage × capability, each cell with its share and interval (percent).

    No colour bar: every cell carries its number, so the colour only guides the eye (darker is larger)."""
    stages = [s["name"] for s in doc["axes"]["stages"]]
    caps = [c["name"] for c in doc["axes"]["capabilities"]]
    props = np.array(section["proportions"], dtype=float)
    vmax = float(props.max()) or 1.0
    with _style():
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.36 * len(stages) + 1.45), layout="constrained")
        cmap = colormaps[SEQUENTIAL]
        ax.imshow(props, cmap=cmap, vmin=0, vmax=vmax, aspect="auto")
        for i in range(len(stages)):
            for j in range(len(caps)):
                n = section["counts"][i][j]
                lo, hi = section["ci_low"][i][j], section["ci_high"][i][j]
                text = f"{100 * props[i, j]:.0f}%\n{100 * lo:.0f}–{100 * hi:.0f}" if n and lo is not None else "0"
                ax.text(j, i, text, ha="center", va="center", fontsize=MIN_PT, linespacing=0.95,
                        color=_text_colour(cmap(props[i, j] / vmax)))  # fmt: skip
        ax.set_xticks(range(len(caps)), [_wrap(c, 15) for c in caps], rotation=90, ha="center", va="top")
        ax.set_yticks(range(len(stages)), [_wrap(s, 16) for s in stages])
        ax.set_xlabel("Agent capability")
        ax.set_ylabel("Workflow stage")
        ax.tick_params(length=2, pad=1.5)
    return fig


def _forest(rows: list[tuple[str, float, float | None, float | None, bool]], *, xlabel: str):
    """Point estimates with interval bars, one row each, a zero line; filled markers where the interval
    excludes zero, open ones where it does not (so colour is never the only signal)."""
    with _style():
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.3 * len(rows) + 0.75), layout="constrained")
        y = np.arange(len(rows))[::-1]
        ax.axvline(0, color="#555555", linewidth=0.6, linestyle="--")
        for yi, (_, est, lo, hi, excludes) in zip(y, rows, strict=True):
            colour = OKABE_ITO[0] if excludes else OKABE_ITO[1]
            if lo is not None:
                ax.plot([lo, hi], [yi, yi], color=colour, linewidth=1.2, solid_capstyle="butt")
            ax.plot([est], [yi], marker="o" if excludes else "D", markersize=4, color=colour,
                    markerfacecolor=colour if excludes else "white")  # fmt: skip
        ax.set_yticks(y, [r[0] for r in rows])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        fig.supxlabel(xlabel, fontsize=STYLE["axes.labelsize"])
        ax.tick_params(length=2, pad=1.5)
        ax.grid(axis="x", linewidth=0.3, color="#dddddd")
        ax.set_axisbelow(True)
    return fig


def difference_figure(doc: dict, diff: dict, *, top: int = 10):
    """The `top` cells with the largest absolute difference between two kinds, with their intervals."""
    stages = [s["name"] for s in doc["axes"]["stages"]]
    caps = [c["name"] for c in doc["axes"]["capabilities"]]
    est = np.array(diff["estimate"], dtype=float)
    order = np.argsort(-np.abs(est), axis=None, kind="stable")[:top]
    rows = []
    for k in order:
        i, j = divmod(int(k), len(caps))
        lo, hi = diff["ci_low"][i][j], diff["ci_high"][i][j]
        rows.append((_wrap(f"{stages[i]} × {caps[j]}", 30), 100 * est[i, j], 100 * lo, 100 * hi,
                     bool(diff["excludes_zero"][i][j])))  # fmt: skip
    a, b = KIND_LABELS[diff["a"]], KIND_LABELS[diff["b"]]
    return _forest(rows, xlabel=f"Difference, percentage points ({a} − {b})")


def sensitivity_figure(doc: dict):
    """The contrast on all data and under each sensitivity check."""
    c = doc["contrast"]
    rows = [("All data", 100 * c["estimate"], 100 * c["ci_low"], 100 * c["ci_high"], bool(c["excludes_zero"]))]
    for check in c["sensitivity"]:
        if check["status"] == "ok":
            short = check["description"].split(":")[0].split(" (")[0]
            rows.append((_wrap(short, 28), 100 * check["estimate"], 100 * check["ci_low"], 100 * check["ci_high"],
                         bool(check["excludes_zero"])))  # fmt: skip
    a, b = KIND_LABELS[c["a"]], KIND_LABELS[c["b"]]
    return _forest(rows, xlabel=f"Difference, percentage points ({a} − {b})")


STATISTICS = (("fleiss_kappa", "Fleiss' κ", "o"), ("krippendorff_alpha", "Krippendorff's α", "s"),
              ("gwet_ac1", "Gwet's AC1", "^"))  # fmt: skip


def agreement_figure(doc: dict, axis_titles: dict):
    """κ, α and AC1 per axis with their intervals; a one-sided bound is drawn as a dashed bar to 1."""
    axes = [a for a in doc["axes"] if a["status"] == "ok"]
    with _style():
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.34 * len(axes) + 1.0), layout="constrained")
        y = np.arange(len(axes))[::-1]
        for s, (key, label, marker) in enumerate(STATISTICS):
            offset = (1 - s) * 0.24
            for yi, axis in zip(y, axes, strict=True):
                e = axis[key]
                if e["value"] is None:
                    continue
                style = (0, (2, 1)) if e.get("one_sided") else "-"
                if e["ci_low"] is not None:
                    ax.plot([e["ci_low"], e["ci_high"]], [yi + offset] * 2, color=OKABE_ITO[s], linestyle=style,
                            linewidth=1.1)  # fmt: skip
                ax.plot([e["value"]], [yi + offset], marker=marker, markersize=3.8, color=OKABE_ITO[s],
                        linestyle="none", label=label if yi == y[0] else None)  # fmt: skip
        ax.set_yticks(y, [_wrap(axis_titles[a["axis"]], 14) for a in axes])
        ax.set_ylim(-0.6, len(axes) - 0.4)
        ax.set_xlim(min(-0.02, ax.get_xlim()[0]), 1.02)
        level = int(100 * doc["parameters"]["level"])
        fig.supxlabel(f"Agreement ({level}% interval; dashed: one-sided lower bound)", fontsize=STYLE["axes.labelsize"])
        fig.legend(loc="outside upper center", frameon=False, ncols=3, handletextpad=0.2, columnspacing=0.9)
        ax.grid(axis="x", linewidth=0.3, color="#dddddd")
        ax.set_axisbelow(True)
        ax.tick_params(length=2, pad=1.5)
    return fig


def _shown(ax, label, axis: str) -> bool:
    """A tick label that is drawn: matplotlib keeps labels for ticks outside the view limits, unshown."""
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    at = label.get_position()[0 if axis == "x" else 1]
    return bool(label.get_text()) and lo - 1e-9 <= at <= hi + 1e-9


def layout_problems(fig) -> list[str]:
    """What would make the figure unreadable in print: text under MIN_PT, anything drawn outside the canvas,
    tick labels that overlap each other. Empty when the figure is fit to print."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = [
        f"{t.get_text()!r}: {t.get_fontsize()} pt"
        for t in fig.findobj(matplotlib.text.Text)
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_PT
    ]
    drawn, canvas = fig.get_tightbbox(renderer), fig.bbox_inches
    if drawn.x0 < -0.01 or drawn.y0 < -0.01 or drawn.x1 > canvas.x1 + 0.01 or drawn.y1 > canvas.y1 + 0.01:
        problems.append(f"drawn outside the canvas: {drawn} beyond {canvas}")
    for ax in fig.axes:
        for axis, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
            boxes = [lb.get_window_extent(renderer) for lb in labels if _shown(ax, lb, axis)]
            problems += [f"{axis} tick labels overlap" for a, b in pairwise(boxes) if a.overlaps(b)]
    return problems


def render(fig, fmt: str) -> bytes:
    """The figure as SVG or PDF at its set size (never cropped: the width stays 85 mm)."""
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"CreationDate": None}
    with _style():
        fig.savefig(buf, format=fmt, metadata=metadata)
    plt.close(fig)
    return buf.getvalue()


def report_figures(data: dict, axis_titles: dict) -> dict[str, Callable[[], Figure]]:
    """name -> a function drawing the figure, for every figure the study's data supports (a figure is saved once,
    so SVG and PDF each draw their own)."""
    doc = data["analysis"]
    figs: dict[str, Callable[[], Figure]] = {}
    for section in doc["kinds"]:
        if section["n_episodes"] and section["status"] == "ok":
            figs[f"matrix-{section['kind']}"] = partial(matrix_figure, doc, section)
    for diff in doc["differences"]:
        if diff["status"] == "ok":
            figs[f"difference-{diff['a']}-{diff['b']}"] = partial(difference_figure, doc, diff)
    if doc["contrast"]["status"] == "ok":
        figs["sensitivity"] = partial(sensitivity_figure, doc)
    if any(a["status"] == "ok" for a in data["agreement"]["axes"]):
        figs["agreement"] = partial(agreement_figure, data["agreement"], axis_titles)
    return figs
