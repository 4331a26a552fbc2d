"""Re-run a report bundle: load its export into a scratch study, recompute, and compare every table cell of
report.html and tables.tex with the recomputation.

The scratch study lives inside one database transaction that is always rolled back, so a reproduction leaves
nothing behind, whatever happens (an error, an interrupt, a difference): no scratch slug to clean up, no second
database to configure, and it works the same on SQLite and PostgreSQL and on a fresh clone (the bundle carries
its codebook, loaded in the same transaction when the database lacks it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from annotate.analysis.params import Params
from annotate.exports.datasets import dataset_import, file_sha256
from annotate.models import Study
from annotate.reports.bundle import (
    Rendered,
    canonical_sha256,
    labels_sha256,
    report_render,
)
from annotate.reports.collect import report_documents
from annotate.reports.render import ReadTable, read_html_tables, read_tex_tables
from annotate.reports.tables import NOT_FROM_EXPORT
from taxonomy.models import Codebook
from taxonomy.services import codebook_load


class BundleError(ValueError):
    """The folder is not a report bundle, or its export does not load."""


@dataclass(frozen=True)
class Difference:
    source: str  # "report.html", "tables.tex" or "bundle"
    table: str
    row: str
    column: str
    expected: str
    got: str

    def __str__(self) -> str:
        parts = [f"{self.source}: {self.table}"]
        parts += [f"row '{self.row}'"] if self.row else []
        parts += [f"column '{self.column}'"] if self.column else []
        return " · ".join(parts) + f": expected {self.expected!r}, got {self.got!r}"


@dataclass
class Reproduction:
    differences: list[Difference] = field(default_factory=list)
    compared_cells: int = 0
    compared_tables: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)  # tables the export cannot recompute (NOT_FROM_EXPORT)

    @property
    def identical(self) -> bool:
        return not self.differences


class _RollBack(Exception):
    pass


def _params(p: dict) -> Params:
    """The report's analysis parameters from provenance.json (every field Params has, whatever it gains)."""
    kw = {f.name: p[f.name] for f in fields(Params) if f.name in p}
    kw["cell"] = tuple(p["cell"]) if p.get("cell") is not None else None
    kw["contrast"] = tuple(p["contrast"])
    return Params(**kw)


def _codebook(folder: Path, prov: dict, found: list[Difference]) -> None:
    """The bundle's codebook, and the earlier versions the study moved from (oldest first), loaded where missing."""
    for entry in [*prov["codebook"].get("earlier", [])[::-1], prov["codebook"]]:
        data = json.loads((folder / entry["file"]).read_text(encoding="utf-8"))
        if canonical_sha256(data) != entry["sha256"]:
            found.append(Difference("bundle", entry["file"], "", "sha256", entry["sha256"], canonical_sha256(data)))
        if not Codebook.objects.filter(name=data["name"], version=data["version"]).exists():
            codebook_load(data=data, publish=True)


def _scratch_export(folder: Path, prov: dict, tmp: Path, found: list[Difference]) -> Path:
    """A copy of the bundle's export whose manifest matches the file: a changed export must still load, so that
    the numbers it changes are named, not only its checksum."""
    src = folder / prov["export"]["file"]
    if not src.exists():
        raise BundleError(f"the bundle has no export at {prov['export']['file']}")
    got = file_sha256(src)
    if got != prov["export"]["sha256"]:
        found.append(Difference("bundle", prov["export"]["file"], "", "sha256", prov["export"]["sha256"], got))
    digest, _ = labels_sha256(src)
    if digest != prov["labels"]["sha256"]:
        found.append(Difference("bundle", "final labels", "", "sha256", prov["labels"]["sha256"], digest))
    dst = tmp / src.name
    shutil.copyfile(src, dst)
    manifest = folder / prov["export"]["manifest"]
    man = json.loads(manifest.read_text(encoding="utf-8")) if manifest.exists() else {}
    man["sha256"] = got
    Path(f"{dst}.manifest.json").write_text(json.dumps(man), encoding="utf-8")
    return dst


def recompute(folder: Path, prov: dict, found: list[Difference], *, progress=None) -> Rendered:
    """The bundle's report recomputed from its export in a rolled-back scratch study."""
    result: list[Rendered] = []
    with tempfile.TemporaryDirectory(prefix="faultline-reproduce-") as tmp:
        export = _scratch_export(folder, prov, Path(tmp), found)
        try:
            with transaction.atomic():
                _codebook(folder, prov, found)
                slug = f"reproduce-{uuid.uuid4().hex[:12]}"
                study = dataset_import(
                    path=export, slug=slug, coders_per_episode=prov["study"]["coders_per_episode"]
                ).study
                Study.objects.filter(pk=study.pk).update(blind=prov["study"]["blind"])
                study.blind = prov["study"]["blind"]
                data = report_documents(study, _params(prov["parameters"]), progress=progress)
                data["study"].update(slug=prov["study"]["slug"], name=prov["study"]["name"])
                result.append(report_render(data, provenance=prov, figures=[]))
                raise _RollBack
        except _RollBack:
            pass
        except ValidationError as exc:
            raise BundleError(f"the bundle's export does not load: {'; '.join(exc.messages)}") from exc
    return result[0]


def _row_name(t: ReadTable, i: int) -> str:
    return t.rows[i][0] if i < len(t.rows) and t.rows[i] else f"row {i + 1}"


def compare_tables(
    source: str, expected: dict[str, ReadTable], got: dict[str, ReadTable], titles: dict[str, str], out: Reproduction
) -> None:
    """Every cell of every table of `expected` against `got`, by position, named by row and column labels."""
    for key in sorted(set(expected) | set(got)):
        if key in NOT_FROM_EXPORT:
            if key not in out.not_compared:
                out.not_compared.append(key)
            continue
        title = titles.get(key, key)
        e, g = expected.get(key), got.get(key)
        if e is None or g is None:
            out.differences.append(Difference(source, title, "", "", "present" if e else "absent",
                                              "present" if g else "absent"))  # fmt: skip
            continue
        if key not in out.compared_tables:
            out.compared_tables.append(key)
        for j, (he, hg) in enumerate(zip(e.header, g.header, strict=False)):
            if he != hg:
                out.differences.append(Difference(source, title, "(header)", f"column {j + 1}", he, hg))
        for i in range(max(len(e.rows), len(g.rows))):
            re_, rg = (e.rows[i] if i < len(e.rows) else ()), (g.rows[i] if i < len(g.rows) else ())
            for j in range(max(len(re_), len(rg))):
                ce, cg = (re_[j] if j < len(re_) else "(none)"), (rg[j] if j < len(rg) else "(none)")
                out.compared_cells += 1
                if ce != cg:
                    column = e.header[j] if j < len(e.header) else f"column {j + 1}"
                    out.differences.append(Difference(source, title, _row_name(e, i), column, ce, cg))


def bundle_reproduce(folder: Path, *, progress=None) -> Reproduction:
    folder = Path(folder)
    try:
        prov = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
        html = (folder / "report.html").read_text(encoding="utf-8")
        tex = (folder / "tables.tex").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BundleError(f"not a report bundle: {exc.filename} is missing") from exc
    if prov.get("schema") != "faultline.report/1":
        raise BundleError("not a report bundle: provenance.json has no faultline.report/1 schema")
    out = Reproduction()
    rendered = recompute(folder, prov, out.differences, progress=progress)
    titles = {t.key: t.title for t in rendered.tables}
    compare_tables("report.html", read_html_tables(html), read_html_tables(rendered.html), titles, out)
    compare_tables("tables.tex", read_tex_tables(tex), read_tex_tables(rendered.tex), titles, out)
    return out
