"""A study's report bundle: report.html (self-contained) and report.pdf, figures as SVG and PDF, tables.tex and
one CSV per table, the methods paragraph, provenance.json, and the study's dataset export and codebook, so a
reviewer can re-run every number (`manage.py reproduce`).

Layout of the folder (and of the zip, under one top-level folder):

    report.html  report.pdf  methods.txt  tables.tex  provenance.json  documents.json
    tables/<table>.csv   figures/<figure>.svg  figures/<figure>.pdf
    export/<slug>.jsonl  export/<slug>.jsonl.manifest.json  codebook.json  codebooks/<earlier versions>.json
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone

from annotate.analysis.params import Params
from annotate.exports.datasets import dataset_rows, export_write, file_sha256
from annotate.models import Study
from annotate.reports.collect import report_documents
from annotate.reports.methods import methods_paragraph
from annotate.reports.render import table_csv, tables_tex
from annotate.reports.tables import AXIS_TITLES, Table, report_tables
from taxonomy.services import codebook_export

SCHEMA = "faultline.report/1"
SOFTWARE = "Faultline"
LABEL_FIELDS = (
    "document_kind", "external_id", "episode_order", "split", "label_status", "label_failure_type", "label_source",
    "label_stage", "label_capability", "label_not_a_failure", "label_needs_new_type",
)  # fmt: skip
CAPTIONS = {
    "matrix": "Share of {label} episodes by workflow stage × agent capability; each cell gives the share and its "
    "interval in percent.",
    "difference": "The cells with the largest difference between {a} and {b}, with cluster-bootstrap intervals.",
    "sensitivity": "The contrast on all data and under each sensitivity check.",
    "agreement": "Fleiss' κ, Krippendorff's α and Gwet's AC1 per axis, with bootstrap intervals.",
}


def software_version() -> dict:
    """Name, version (pyproject) and the git commit of the running code, if it is a checkout."""
    version = "unknown"
    pyproject = Path(settings.BASE_DIR) / "pyproject.toml"
    for line in pyproject.read_text(encoding="utf-8").splitlines() if pyproject.exists() else []:
        if line.startswith("version = "):
            version = line.split("=", 1)[1].strip().strip('"')
            break
    commit, dirty = None, None
    git = shutil.which("git")
    try:
        if git:
            commit = _git(git, "rev-parse", "HEAD")
            dirty = bool(_git(git, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        pass
    return {"name": SOFTWARE, "version": version, "commit": commit, "dirty": dirty}


def _git(git: str, *args: str) -> str:
    # Fixed arguments, no shell: the commit of the code that computed the numbers.
    out = subprocess.run([git, *args], cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=10, check=True)  # noqa: S603
    return out.stdout.strip()


def canonical_sha256(data) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def labels_sha256(export_path: Path) -> tuple[str, int]:
    """A hash of the final labels in an export, independent of database ids and row order, and the row count."""
    lines = sorted(
        json.dumps([row.get(f) for f in LABEL_FIELDS], ensure_ascii=False) for row in dataset_rows(export_path)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest(), len(lines)


def _caption(name: str) -> str:
    from annotate.analysis.documents import KIND_LABELS

    kind, _, rest = name.partition("-")
    if kind == "matrix":
        return CAPTIONS["matrix"].format(label=KIND_LABELS.get(rest, rest))
    if kind == "difference":
        a, b = (KIND_LABELS.get(k, k) for k in rest.split("-", 1))
        return CAPTIONS["difference"].format(a=a, b=b)
    return CAPTIONS[name]


@dataclass(frozen=True)
class Rendered:
    """A report's parts in memory: what `report_write` writes and what `reproduce` compares."""

    data: dict
    tables: list[Table]
    methods: str
    html: str
    tex: str


def report_render(data: dict, *, provenance: dict, figures: list[dict]) -> Rendered:
    tables = report_tables(data)
    methods = methods_paragraph(data, software=f"{SOFTWARE} {provenance['software']['version']}")
    numbered = list(enumerate(tables, 1))
    context = {"study": data["study"], "tables": tables, "methods": methods, "figures": figures,
               "provenance": provenance,
               "codebook_versions": data["analysis"]["parameters"].get("codebook_versions", []),
               "verified": ", ".join(f"Table {n}" for n, t in numbered if t.from_export),
               "not_verified": [(n, t) for n, t in numbered if not t.from_export]}  # fmt: skip
    html = render_to_string("annotate/report/report.html", context)
    return Rendered(data, tables, methods, html, tables_tex(tables, title=data["study"]["name"]))


def _provenance(study: Study, params: Params, data: dict, export: dict, out: Path) -> dict:
    # The figures' module loads matplotlib (and Pillow): only the processes that draw a report pay for them.
    from annotate.reports.plots import STYLE, WIDTH_MM

    export_path = out / export["file"]
    digest, rows = labels_sha256(export_path)
    codebook = codebook_export(codebook=study.codebook)
    return {
        "schema": SCHEMA,
        "study": {"slug": study.slug, "name": study.name, "coders_per_episode": study.coders_per_episode,
                  "label_rule": study.label_rule, "blind": study.blind},
        "codebook": {"label": study.codebook.label, "sha256": canonical_sha256(codebook), "file": "codebook.json",
                     # Every version the study used, now first: the report's numbers are all under the first.
                     "versions_used": data["analysis"]["parameters"].get("codebook_versions", []),
                     "earlier": _earlier_codebooks(study, out)},
        "labels": {"sha256": digest, "rows": rows, "fields": list(LABEL_FIELDS),
                   "fingerprint": data["analysis"]["data"]["fingerprint"]},
        "export": {**export, "sha256": file_sha256(export_path)},
        "parameters": {**asdict(params), "agreement_bootstrap": data["agreement_bootstrap"],
                       "interval_name": data["analysis"]["parameters"]["interval_name"]},
        "seeds": {"analysis": params.seed, "agreement": data["agreement"]["parameters"]["seed"],
                  "exposure": data["exposure"]["seed"] if data["exposure"] else None},
        "software": software_version(),
        "figures": {"width_mm": WIDTH_MM, "min_font_pt": 7, "style": {k: str(v) for k, v in STYLE.items()}},
        "data_as_of": data["analysis"]["data"]["as_of"],
        "generated_at": timezone.now().isoformat(),
    }  # fmt: skip


class _Phases:
    """One progress bar over the report's steps: the bootstrap takes the first 70 of 100."""

    def __init__(self, progress):
        self.progress = progress or (lambda done, total: None)

    def bootstrap(self, done: int, total: int) -> None:
        self.progress(int(70 * done / total) if total else 0, 100)

    def at(self, n: int) -> None:
        self.progress(n, 100)


def report_write(*, study: Study, out: Path, params: Params | None = None, progress=None) -> dict:
    """Write the bundle into the folder `out` (created; an existing report there is replaced). Returns the
    provenance."""
    params = params or Params()
    phases = _Phases(progress)
    out = Path(out)
    for sub in ("figures", "tables", "export", "codebooks"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    data = report_documents(study, params, progress=phases.bootstrap)
    phases.at(72)
    export_name = f"export/{study.slug}.jsonl"
    man = export_write(study=study, fmt="jsonl", out=out / export_name)
    (out / "codebook.json").write_text(
        json.dumps(codebook_export(codebook=study.codebook), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    provenance = _provenance(study, params, data, {"file": export_name, "rows": man["rows"],
                                                   "manifest": f"{export_name}.manifest.json"}, out)  # fmt: skip
    phases.at(78)
    from annotate.reports.plots import render, report_figures

    figures = []
    for name, draw in report_figures(data, AXIS_TITLES).items():
        (out / "figures" / f"{name}.pdf").write_bytes(render(draw(), "pdf"))
        svg = render(draw(), "svg")
        (out / "figures" / f"{name}.svg").write_bytes(svg)
        figures.append({"name": name, "caption": _caption(name), "svg": inline_svg(svg, name)})
    phases.at(88)
    rendered = report_render(data, provenance=provenance, figures=figures)
    (out / "report.html").write_text(rendered.html, encoding="utf-8")
    (out / "tables.tex").write_text(rendered.tex, encoding="utf-8")
    for t in rendered.tables:
        (out / "tables" / f"{t.key}.csv").write_text(table_csv(t), encoding="utf-8")
    (out / "methods.txt").write_text(rendered.methods + "\n", encoding="utf-8")
    (out / "documents.json").write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                        encoding="utf-8")  # fmt: skip
    # What `reproduce` checks against the export, and what it cannot (with why).
    provenance["verification"] = {
        "compared": [t.key for t in rendered.tables if t.from_export],
        "not_compared": {t.key: t.not_verified_because for t in rendered.tables if not t.from_export},
    }
    provenance["files"] = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    provenance["files"] = sorted({*provenance["files"], "report.pdf", "provenance.json"})
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    phases.at(90)
    pdf_write(rendered.html, out / "report.pdf", base=out)
    phases.at(100)
    return provenance


_SVG_ID = re.compile(r'(\bid="|url\(#|xlink:href="#|href="#)([^")]+)')


def _earlier_codebooks(study: Study, out: Path) -> list[dict]:
    """The earlier codebook versions the study moved from, written beside codebook.json: the export's codings
    and adjudications that wait to be coded again name their type of such a version, which `reproduce` loads
    before the export (from a fresh clone too)."""
    from annotate.coding.codebook_moves import codebook_versions

    written = []
    for version in codebook_versions(study)[1:]:
        data = codebook_export(codebook=version.codebook)
        name = f"codebooks/{version.label}.json"
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append({"label": version.label, "sha256": canonical_sha256(data), "file": name})
    return written


def inline_svg(svg: bytes, prefix: str) -> str:
    """An SVG file as markup to put in HTML: without its XML prolog, and with every id (and reference to one)
    prefixed, since matplotlib numbers ids per figure and several figures share one page."""
    text = svg.decode("utf-8")
    return _SVG_ID.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text[text.index("<svg") :])


def pdf_write(html: str, path: Path, *, base: Path) -> None:
    """report.pdf from report.html with WeasyPrint (imported here: it loads Pango through cffi)."""
    from weasyprint import HTML

    HTML(string=html, base_url=str(base)).write_pdf(str(path))


def pdf_layout_problems(html: str, *, base: Path | None = None) -> list[str]:
    """What the PDF of `html` would lose or garble, from WeasyPrint's own layout of its pages: text past the
    page's content box (a table too wide for the page runs into the margin and is cut at the paper's edge) and
    text boxes drawn over one another. Empty when every piece of text is on the page, apart. Figures are
    checked on their own (annotate.reports.plots.layout_problems): their text is SVG, not laid out here."""
    from weasyprint import HTML
    from weasyprint.formatting_structure.boxes import MarginBox, TextBox

    problems: list[str] = []
    document = HTML(string=html, base_url=str(base) if base else None).render()
    for number, page in enumerate(document.pages, 1):
        box = page._page_box  # WeasyPrint keeps the laid-out boxes there; there is no public accessor
        right = box.content_box_x() + box.width + 0.5  # half a CSS pixel: rounding in the layout
        bottom = box.content_box_y() + box.height + 0.5
        texts = []
        body = [child for child in box.children if not isinstance(child, MarginBox)]  # the footer is in the margin
        for text in (t for child in body for t in _descendants(child, TextBox)):
            x0, y0 = text.position_x, text.position_y
            x1, y1 = x0 + text.margin_width(), y0 + text.margin_height()
            if x1 > right or y1 > bottom or x0 < box.content_box_x() - 0.5:
                problems.append(f"page {number}: {text.text[:40]!r} runs past the page's content box")
            texts.append((y0, y1, x0, x1, text.text))
        texts.sort()
        for i, (_y0, y1, x0, x1, t) in enumerate(texts):
            for v0, _v1, u0, u1, u in texts[i + 1 :]:
                if v0 >= y1 - 0.5:
                    break  # sorted by top: no later box starts above this one's bottom
                if min(x1, u1) - max(x0, u0) > 0.5:
                    problems.append(f"page {number}: {t[:30]!r} and {u[:30]!r} overlap")
    return problems


def _descendants(box, kind):
    for child in getattr(box, "children", None) or ():
        if isinstance(child, kind):
            yield child
        yield from _descendants(child, kind)


def report_zip(folder: Path, zip_path: Path) -> Path:
    """The bundle as one zip with a top-level folder named after the bundle folder."""
    folder = Path(folder)
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, Path(folder.name) / p.relative_to(folder))
    return zip_path
