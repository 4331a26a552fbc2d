"""Figures and tables of the analysis documents: heatmap colours for the HTML tables,
matplotlib SVG/PNG (Agg, made on the server) and CSV.

Colours are colour-blind safe: cividis (reversed: darker is larger) for shares (sequential), PuOr for
differences (diverging, ColorBrewer's colour-blind-safe set). Colour is never
the only signal: cells carry their numbers, and significant differences a symbol.
"""

from __future__ import annotations

import csv
import functools
import io

import numpy as np

SEQUENTIAL = "cividis_r"  # pale yellow for small shares, dark blue for large
DIVERGING = "PuOr"
MARK = "◆"  # interval excludes zero


def _mpl():
    """(pyplot, colormaps, to_hex), imported on first use: matplotlib is 30-40 MB that only the analysis
    pages' heatmaps and figures need, so a web or worker process that never draws one never loads it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return plt, colormaps, to_hex


def _text_colour(rgba) -> str:
    r, g, b = rgba[:3]
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "#ffffff"


@functools.cache
def _colormap(name: str):
    """The named colormap, built once: `colormaps[name]` hands out a fresh copy that builds its lookup table
    again on first use, which cost a page of heatmaps 80 ms (one per cell)."""
    return _mpl()[1][name]


def cell_style(value: float | None, vmax: float, diverging: bool = False) -> dict:
    """Background and text colours for one HTML heatmap cell."""
    if value is None:
        return {"bg": "#ffffff", "fg": "#1d2330"}
    to_hex = _mpl()[2]
    if diverging:
        x = 0.5 + (value / (2 * vmax) if vmax else 0)
        rgba = _colormap(DIVERGING)(min(max(x, 0), 1))
    else:
        x = value / vmax if vmax else 0
        rgba = _colormap(SEQUENTIAL)(0.04 + 0.96 * min(max(x, 0), 1)) if value > 0 else (0.97, 0.97, 0.98, 1)
    return {"bg": to_hex(rgba), "fg": _text_colour(rgba)}


def _axes_labels(doc: dict) -> tuple[list[str], list[str]]:
    return [s["code"] for s in doc["axes"]["stages"]], [c["code"] for c in doc["axes"]["capabilities"]]


def _heatmap(title: str, values: np.ndarray, labels: list[list[str]], doc: dict, *, diverging: bool, vmax: float):
    stages, caps = _axes_labels(doc)
    plt, colormaps, _ = _mpl()
    fig, ax = plt.subplots(figsize=(1.3 * len(caps) + 2.6, 0.62 * len(stages) + 1.6), dpi=110)
    cmap = colormaps[DIVERGING if diverging else SEQUENTIAL]
    vmin = -vmax if diverging else 0
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax or 1, aspect="auto")
    ax.set_xticks(range(len(caps)), [c.replace("_", " ") for c in caps], rotation=30, ha="right")
    ax.set_yticks(range(len(stages)), [s.replace("_", " ") for s in stages])
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            rgba = cmap((values[i, j] - vmin) / ((vmax or 1) - vmin))
            ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=8, color=_text_colour(rgba))
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, format=lambda x, _: f"{100 * x:.0f}%")
    fig.tight_layout()
    return fig


def kind_figure(doc: dict, kind: str):
    section = next(k for k in doc["kinds"] if k["kind"] == kind)
    counts = np.array(section["counts"], dtype=float)
    props = np.array(section["proportions"]) if section["proportions"] is not None else np.zeros_like(counts)
    labels = [
        [f"{int(c)}\n{100 * p:.0f}%" if c else "·" for c, p in zip(cr, pr, strict=True)]
        for cr, pr in zip(counts, props, strict=True)
    ]
    title = f"{section['label']}: {section['n_episodes']} episodes, {section['n_clusters']} clusters"
    return _heatmap(title, props, labels, doc, diverging=False, vmax=float(props.max()) or 1.0)


def difference_figure(doc: dict, a: str, b: str):
    diff = _difference(doc, a, b)
    est = np.array(diff["estimate"])
    sig = np.array(diff["excludes_zero"]) if diff["excludes_zero"] is not None else np.zeros(est.shape, dtype=bool)
    labels = [
        [f"{100 * v:+.0f}" + (f" {MARK}" if s else "") for v, s in zip(er, sr, strict=True)]
        for er, sr in zip(est, sig, strict=True)
    ]
    vmax = float(np.abs(est).max()) or 1.0
    title = f"{a} - {b} (points; {MARK} = {int(100 * doc['parameters']['level'])}% interval excludes 0)"
    return _heatmap(title, est, labels, doc, diverging=True, vmax=vmax)


def _neg(grid):
    return None if grid is None else [[None if v is None else -v for v in row] for row in grid]


def _difference(doc: dict, a: str, b: str) -> dict:
    """The difference a - b, flipping the stored b - a when needed."""
    for d in doc["differences"]:
        if (d["a"], d["b"]) == (a, b):
            return d
        if (d["a"], d["b"]) == (b, a):
            return {**d, "a": a, "b": b, "estimate": _neg(d["estimate"]), "ci_low": _neg(d["ci_high"]),
                    "ci_high": _neg(d["ci_low"])}  # fmt: skip
    raise KeyError((a, b))


def render(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
    _mpl()[0].close(fig)
    return buf.getvalue()


def _at(grid, i: int, j: int):
    return "" if grid is None or grid[i][j] is None else grid[i][j]


def kind_csv(doc: dict, kind: str) -> str:
    """One row per cell: counts, proportions and interval limits."""
    section = next(k for k in doc["kinds"] if k["kind"] == kind)
    stages, caps = _axes_labels(doc)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["kind", "stage", "capability", "count", "n", "proportion", "ci_low", "ci_high", "interval",
                "clusters_with_records", "few_clusters", "interval_name", "effective_clusters", "df",
                "df_upper"])  # fmt: skip
    method = section.get("interval", doc["parameters"]["interval"])
    name = section.get("interval_name", doc["parameters"].get("interval_name", ""))
    for i, s in enumerate(stages):
        for j, c in enumerate(caps):
            limits = (_at(section[key], i, j) for key in ("proportions", "ci_low", "ci_high"))
            flags = (_at(section.get(key), i, j) for key in ("clusters_with_records", "few_clusters"))
            basis = (_at(section.get(key), i, j) for key in ("effective_clusters", "df", "df_upper"))
            w.writerow([kind, s, c, section["counts"][i][j], section["n_episodes"], *limits, method, *flags, name,
                        *basis])  # fmt: skip
    return out.getvalue()


def difference_csv(doc: dict, a: str, b: str) -> str:
    diff = _difference(doc, a, b)
    stages, caps = _axes_labels(doc)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["a", "b", "stage", "capability", "difference", "ci_low", "ci_high", "excludes_zero", "interval",
                "few_clusters"])  # fmt: skip
    method = diff.get("interval", "percentile")
    for i, s in enumerate(stages):
        for j, c in enumerate(caps):
            w.writerow(
                [a, b, s, c, *(_at(diff[key], i, j) for key in ("estimate", "ci_low", "ci_high", "excludes_zero")),
                 method, _at(diff.get("few_clusters"), i, j)]
            )  # fmt: skip
    return out.getvalue()


def heatmap_rows(doc: dict, kind: str, cell_url) -> list[dict]:
    """Rows of an HTML heatmap for one kind: per cell the count, share, interval, colours and link."""
    section = next(k for k in doc["kinds"] if k["kind"] == kind)
    props = section["proportions"]
    vmax = max((max(r) for r in props), default=0) if props else 0
    rows = []
    for i, stage in enumerate(doc["axes"]["stages"]):
        cells = []
        for j, cap in enumerate(doc["axes"]["capabilities"]):
            p = props[i][j] if props else None
            cells.append(
                {
                    "count": section["counts"][i][j],
                    "share": p,
                    "low": section["ci_low"][i][j] if section["ci_low"] else None,
                    "high": section["ci_high"][i][j] if section["ci_high"] else None,
                    "few": bool(section["few_clusters"][i][j]) if section.get("few_clusters") else False,
                    "clusters": _at(section.get("clusters_with_records"), i, j),
                    "style": cell_style(p if section["counts"][i][j] else None, vmax),
                    "url": cell_url(kind, stage["code"], cap["code"]) if section["counts"][i][j] else "",
                    "stage": stage["code"],
                    "capability": cap["code"],
                    "capability_name": cap.get("name") or cap["code"],
                }
            )
        rows.append({"stage": stage, "cells": cells, "total": section["row_totals"][i]})
    return rows


def difference_rows(doc: dict, a: str, b: str, selected: dict | None) -> list[dict]:
    diff = _difference(doc, a, b)
    est = diff["estimate"]
    vmax = max(abs(v) for row in est for v in row) or 1.0
    rows = []
    for i, stage in enumerate(doc["axes"]["stages"]):
        cells = []
        for j, cap in enumerate(doc["axes"]["capabilities"]):
            v = est[i][j]
            cells.append(
                {
                    "value": v,
                    "low": diff["ci_low"][i][j] if diff["ci_low"] else None,
                    "high": diff["ci_high"][i][j] if diff["ci_high"] else None,
                    "few": bool(diff["few_clusters"][i][j]) if diff.get("few_clusters") else False,
                    "significant": bool(diff["excludes_zero"][i][j]) if diff["excludes_zero"] else False,
                    "style": cell_style(v, vmax, diverging=True),
                    "cell": f"{stage['code']}:{cap['code']}",
                    "selected": selected == {"stage": stage["code"], "capability": cap["code"]},
                }
            )
        rows.append({"stage": stage, "cells": cells})
    return rows


AXIS_NAMES = {
    "failure_type": "failure type", "category": "category", "source": "responsibility source",
    "stage": "workflow stage", "capability": "agent capability", "overall": "overall",
}  # fmt: skip


def confusion_rows(confusion: dict, picker, *, category: str = "") -> tuple[list[dict], list[dict]]:
    """A confusion matrix as table rows and columns with display names.

    Only failure types keep their code ("CTL-05", shown beside or over the name); axis values and
    "not_a_failure" are shown by name alone. Category labels link to their drill-down; with
    `category`, only the rows of that category's types are kept, against the columns any of them
    (or the category) uses. The folded row and column of a bounded matrix (`other`, see
    annotate.analysis.coders) are no label: their shared cell is not agreement.
    """
    labels, matrix = confusion["labels"], confusion["matrix"]
    folded = len(labels) - 1 if confusion.get("other") else -1  # the row and column of the folded labels
    names = {v.code: v.name for values in picker.axes.values() for v in values}
    names.update({t.code: t.name for t in picker.types})
    categories = {code: name for code, name, _ in picker.categories}
    names.update(categories)
    names["not_a_failure"] = "Not a failure"
    category_of = {t.code: t.category.code for t in picker.types}
    rows_ix = list(range(len(labels)))
    cols_ix = list(range(len(labels)))
    if category:
        rows_ix = [i for i in rows_ix if category_of.get(labels[i]) == category]
        cols_ix = [j for j in cols_ix if category_of.get(labels[j]) == category or any(matrix[i][j] for i in rows_ix)]

    def head(label: str) -> dict:
        link = f"?axis=failure_type&category={label}#pairs-h" if label in categories and not category else ""
        code = label if label in category_of else ""
        return {"label": label, "code": code, "name": names.get(label, label or "—"), "link": link}

    columns = [head(labels[j]) for j in cols_ix]
    rows = [
        {**head(labels[i]), "cells": [{"n": matrix[i][j], "diag": i == j != folded} for j in cols_ix]} for i in rows_ix
    ]
    return rows, columns
