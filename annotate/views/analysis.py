"""Analysis pages: matrices with their contrast and sensitivity panel, agreement, hold-out coverage,
the episodes of one cell, and every figure as SVG, PNG, CSV or JSON.

The pages render the same documents the commands and the API produce
(annotate.analysis); nothing here computes a statistic of its own.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotate.analysis import figures
from annotate.analysis.arrays import KINDS, codebook_axes
from annotate.analysis.bootstrap import over_threshold
from annotate.analysis.coders import agreement_document
from annotate.analysis.documents import KIND_LABELS, analysis_document, cell_episodes, coverage_document
from annotate.analysis.figures import AXIS_NAMES, confusion_rows
from annotate.analysis.params import ParameterError
from annotate.analysis.results import agreement_key, analysis_key, coverage_key, result_job_start, result_shown
from annotate.analysis.versions import params_for, version_choice
from annotate.coding.selectors import codebook_picker
from annotate.models import Document, Job, ResultKind, Study
from annotate.views.access import study_view
from annotate.views.reports import report_job_for
from lib import stats
from taxonomy.services import parse_codebook_label

PARAMS = ("bootstrap", "seed", "cell", "contrast", "cap", "bca", "interval", "version")
METHODS = [(m, stats.CELL_METHOD_LABELS[m]) for m in stats.CELL_METHODS]
FORMATS = {"svg": "image/svg+xml", "png": "image/png", "csv": "text/csv; charset=utf-8", "json": "application/json"}


def _document(request: HttpRequest, study: Study, *, sensitivity: bool = True):
    """(doc, params, errors, job, shown, choice, axes): the analysis for the query string, or why there is none;
    the codebook version it is for, and that version's axes.

    Which document is shown, and whether it may be computed in the request, is decided by
    annotate.analysis.results.result_shown, as on the agreement and coverage pages and in the API."""
    raw = {k: request.GET.get(k) for k in PARAMS}
    try:
        params, choice, axes = params_for(study, raw)
    except ParameterError as exc:
        return None, None, exc.errors, None, None, None, codebook_axes(study)
    job_id = request.GET.get("job", "")
    if job_id.isdigit():
        job = get_object_or_404(Job, pk=int(job_id), study=study, kind="bootstrap")
        return (job.result if job.status == "success" else None), params, {}, job, None, choice, axes
    shown = result_shown(study, ResultKind.ANALYSIS, analysis_key(params),
                         lambda: analysis_document(study, params, sensitivity=sensitivity),
                         inline_ok=not over_threshold(params.bootstrap))  # fmt: skip
    return shown.doc, params, {}, shown.job, shown, choice, axes


def _kinds_with_episodes(study: Study, doc: dict | None) -> list[tuple[str, str]]:
    """The contrast selector offers only the document kinds this study has primary episodes of.

    With a document they are read from it (labelled or excluded, per kind): no query. Without one, one probe
    per kind, ordered as the (study, kind, cluster) index so that PostgreSQL walks it: as an EXISTS, a kind
    with no documents was planned as a scan of every document of the study (1.6 s at a million)."""
    if doc is not None:
        return [(k["kind"], KIND_LABELS[k["kind"]]) for k in doc["kinds"]
                if k["n_episodes"] or sum(k["excluded"].values())]  # fmt: skip
    first = Document.objects.filter(study_id=study.pk).order_by("kind", "cluster").values("pk")
    return [(k, KIND_LABELS[k]) for k in KINDS if first.filter(kind=k)[:1]]


def _query(request: HttpRequest, **changes) -> str:
    q = request.GET.copy()
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v
    return q.urlencode()


@require_GET
@study_view("read", report=True)
def analysis_page(request: HttpRequest, study: Study) -> HttpResponse:
    doc, params, errors, job, shown, choice, axes = _document(request, study)
    big = params is not None and over_threshold(params.bootstrap)
    context = {"study": study, "membership": request.membership, "doc": doc, "errors": errors, "job": job,
               "params": params, "query": _query(request), "kinds": _kinds_with_episodes(study, doc),
               "axes": axes, "big": big, "methods": METHODS, "shown": shown, "choice": choice,
               "run_url": reverse("analysis_run", args=[study.slug]),
               "default_method": stats.DEFAULT_CELL_METHOD,
               "report_job": report_job_for(request, study)}  # fmt: skip
    if doc is not None:
        context.update(_panels(request, study, doc))
    template = "annotate/partials/_sensitivity.html" if request.htmx and doc else "annotate/analysis.html"
    return render(request, template, context, status=400 if errors else 200)


def _panels(request: HttpRequest, study: Study, doc: dict) -> dict:
    c = doc["contrast"]

    version = doc["parameters"].get("version")

    def cell_url(kind, stage, capability):
        url = reverse("analysis_cell", args=[study.slug, kind, stage, capability])
        return f"{url}?{urlencode({'version': version})}" if version else url

    heatmaps = [
        {"section": k, "rows": figures.heatmap_rows(doc, k["kind"], cell_url) if k["status"] == "ok" else []}
        for k in doc["kinds"]
        if k["n_episodes"] or k["kind"] in (c["a"], c["b"])
    ]
    diff = figures.difference_rows(doc, c["a"], c["b"], c["cell"]) if c["status"] == "ok" else None
    labels = {"a_label": KIND_LABELS[c["a"]], "b_label": KIND_LABELS[c["b"]], **_cell_names(doc, c.get("cell"))}
    others = [v for v in doc["parameters"].get("codebook_versions", []) if v != doc["parameters"]["codebook"]]
    return {"heatmaps": heatmaps, "diff_rows": diff, "contrast": c, "mark": figures.MARK, "other_versions": others,
            **labels}  # fmt: skip


def _cell_names(doc: dict, cell: dict | None) -> dict:
    """The contrast cell's stage and capability by the codebook's names ("Iterative execution"), never its codes."""
    if not cell:
        return {"cell_stage": "", "cell_capability": ""}
    stages = {v["code"]: v["name"] for v in doc["axes"]["stages"]}
    capabilities = {v["code"]: v["name"] for v in doc["axes"]["capabilities"]}
    return {"cell_stage": stages.get(cell["stage"], ""), "cell_capability": capabilities.get(cell["capability"], "")}


@require_GET
@study_view("read", report=True)
def analysis_cell(request: HttpRequest, study: Study, kind: str, stage: str, capability: str) -> HttpResponse:
    after = request.GET.get("after", "")
    try:
        choice = version_choice(study, request.GET.get("version"))
    except ParameterError as exc:
        raise Http404(exc.errors["version"][0]) from exc
    found = cell_episodes(study, kind, stage, capability, after=int(after) if after.isdigit() else 0,
                          version=choice if choice.key else None)  # fmt: skip
    if found is None:
        raise Http404("No such cell")
    context = {"study": study, "kind": kind, "kind_label": KIND_LABELS[kind], "stage": stage,
               "capability": capability, "version": choice.key, **found}  # fmt: skip
    return render(request, "annotate/analysis_cell.html", context)


@require_GET
@study_view("read", report=True)
def analysis_figure(request: HttpRequest, study: Study, name: str, fmt: str) -> HttpResponse:
    """`name` is a kind, `difference` (the contrast), or `analysis` (the whole document, JSON only)."""
    if fmt not in FORMATS or name not in (*KINDS, "difference", "analysis"):
        raise Http404("No such figure")
    doc, _, errors, _, shown, _, _ = _document(request, study, sensitivity=name == "analysis")
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    if doc is None:
        raise Http404("Run the analysis first")
    a, b = doc["contrast"]["a"], doc["contrast"]["b"]
    version = doc["parameters"].get("version")  # an earlier codebook version's numbers say so in their name
    filename = f"{study.slug}-{name}{'-' + version.replace('@', '-') if version else ''}.{fmt}"
    if fmt == "json":
        body = doc if name == "analysis" else _section(doc, name)
        content: bytes | str = json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False)
    elif name == "analysis":
        raise Http404("The whole analysis is JSON only")
    elif fmt == "csv":
        content = figures.difference_csv(doc, a, b) if name == "difference" else figures.kind_csv(doc, name)
    else:
        fig = figures.difference_figure(doc, a, b) if name == "difference" else figures.kind_figure(doc, name)
        content = figures.render(fig, fmt)
    response = HttpResponse(content, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    if shown is not None:  # as the API says it: current, live (computed for this download) or stale
        response["X-Faultline-Result"] = shown.state
    return response


def _section(doc: dict, name: str) -> dict:
    common = {k: doc[k] for k in ("schema", "study", "parameters", "data", "axes")}
    if name == "difference":
        c = doc["contrast"]
        return {**common, "difference": figures._difference(doc, c["a"], c["b"]), "contrast": c}
    return {**common, "kind": next(k for k in doc["kinds"] if k["kind"] == name)}


@require_POST
@study_view("write", report=True)
def analysis_run(request: HttpRequest, study: Study) -> HttpResponse:
    """Start a large-B bootstrap as a job (coders and owners), then show its progress on the analysis page."""
    try:
        params, _, _ = params_for(study, {k: request.POST.get(k) for k in PARAMS})
    except ParameterError as exc:
        messages.error(request, f"Not started: {exc}")
        return redirect(reverse("analysis_page", args=[study.slug]))
    job_params = {"bootstrap": params.bootstrap, "seed": params.seed, "cap": params.cap, "bca": params.bca,
                  "interval": params.interval, **({"version": params.version} if params.version else {})}  # fmt: skip
    job_params.update({k: request.POST[k] for k in ("cell", "contrast") if request.POST.get(k)})
    job = result_job_start(study=study, kind=ResultKind.ANALYSIS, key=analysis_key(params), params=job_params,
                           user=request.user)  # fmt: skip
    query = urlencode({**{k: v for k, v in job_params.items() if k != "result_key"}, "bca": "1" if params.bca else "",
                       "job": job.pk})  # fmt: skip
    return redirect(reverse("analysis_page", args=[study.slug]) + f"?{query}")


@require_GET
@study_view("read", report=True)
def agreement_page(request: HttpRequest, study: Study) -> HttpResponse:
    try:
        bootstrap = int(request.GET.get("bootstrap") or 1000)
        seed = int(request.GET.get("seed") or 0)
    except ValueError:
        bootstrap, seed = -1, -1
    if not (100 <= bootstrap <= 20000 and 0 <= seed < 2**32):
        return render(request, "annotate/agreement.html", {"study": study, "error": True}, status=400)
    version = request.GET.get("version") or None
    key = agreement_key(bootstrap=bootstrap, seed=seed, version=version)
    try:
        shown = result_shown(
            study, ResultKind.AGREEMENT, key,
            lambda: agreement_document(study, bootstrap=bootstrap, seed=seed, version=version),
        )  # fmt: skip
    except ValueError as exc:  # a codebook version the study never used
        return render(request, "annotate/agreement.html", {"study": study, "error": str(exc)}, status=400)
    doc = shown.doc
    run = {
        "study": study,
        "membership": request.membership,
        "shown": shown,
        "job": shown.job,
        "run_url": reverse("agreement_run", args=[study.slug]),
        "run_params": {"bootstrap": bootstrap, "seed": seed, **({"version": version} if version else {})},
        "version": version,
    }
    if doc is None:
        if request.GET.get("format") == "json":
            raise Http404("Not computed yet: start the computation on the agreement page")
        return render(request, "annotate/agreement.html", {**run, "doc": None})
    if request.GET.get("format") == "json":
        return _download(study, "agreement", json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    axis = request.GET.get("axis") or "failure_type"
    chosen = next((a for a in doc["axes"] if a["axis"] == axis), doc["axes"][0])
    # Names and categories of the version the numbers use (an earlier one, after a codebook migration).
    picker = codebook_picker(parse_codebook_label(doc["parameters"]["codebook"]))
    drill = request.GET.get("category", "")
    drill = drill if any(code == drill for code, _, _ in picker.categories) else ""
    # 56 x 56 types cannot be read: failure types are shown by category first, then one category's types.
    by_category = chosen["axis"] == "failure_type" and not drill
    category_pairs = {(p["a"], p["b"]): p for a in doc["axes"] if a["axis"] == "category" for p in a["pairs"]}
    for pair in chosen["pairs"]:
        matrix = category_pairs.get((pair["a"], pair["b"]), pair) if by_category else pair
        pair["rows"], pair["columns"] = confusion_rows(matrix["confusion"], picker, category=drill)
    context = {
        **run, "doc": doc, "chosen": chosen, "by_category": by_category, "drill": drill, "axis_names": AXIS_NAMES,
        "drill_name": {c: n for c, n, _ in picker.categories}.get(drill, ""),
    }  # fmt: skip
    return render(request, "annotate/agreement.html", context)


@require_GET
@study_view("read", report=True)
def coverage_page(request: HttpRequest, study: Study) -> HttpResponse:
    try:
        version = version_choice(study, request.GET.get("version")).key
    except ParameterError as exc:
        return render(request, "annotate/coverage.html", {"study": study, "error": exc.errors["version"][0]},
                      status=400)  # fmt: skip
    shown = result_shown(study, ResultKind.COVERAGE, coverage_key(version=version),
                         lambda: coverage_document(study, version=version))  # fmt: skip
    if request.GET.get("format") == "json":
        if shown.doc is None:
            raise Http404("Not computed yet: start the computation on the coverage page")
        return _download(study, "coverage", json.dumps(shown.doc, indent=2, sort_keys=True, ensure_ascii=False))
    context = {"study": study, "membership": request.membership, "doc": shown.doc, "shown": shown, "job": shown.job,
               "run_url": reverse("coverage_run", args=[study.slug]), "version": version,
               "run_params": {"version": version} if version else {}}  # fmt: skip
    return render(request, "annotate/coverage.html", context)


@require_POST
@study_view("write", report=True)
def agreement_run(request: HttpRequest, study: Study) -> HttpResponse:
    """Compute and store the agreement as a job (coders and owners), then show its progress on the page."""
    try:
        bootstrap, seed = int(request.POST.get("bootstrap") or 1000), int(request.POST.get("seed") or 0)
    except ValueError:
        bootstrap, seed = -1, -1
    if not (100 <= bootstrap <= 20000 and 0 <= seed < 2**32):
        messages.error(
            request, "Not started: bootstrap must be between 100 and 20,000 and seed between 0 and 2^32 - 1."
        )
        return redirect(reverse("agreement_page", args=[study.slug]))
    version = request.POST.get("version") or None
    run = {"bootstrap": bootstrap, "seed": seed, **({"version": version} if version else {})}
    result_job_start(study=study, kind=ResultKind.AGREEMENT, key=agreement_key(bootstrap=bootstrap, seed=seed,
                     version=version), params=run, user=request.user)  # fmt: skip
    return redirect(reverse("agreement_page", args=[study.slug]) + "?" + urlencode(run))


@require_POST
@study_view("write", report=True)
def coverage_run(request: HttpRequest, study: Study) -> HttpResponse:
    """Compute and store the hold-out coverage as a job (coders and owners)."""
    try:
        version = version_choice(study, request.POST.get("version")).key
    except ParameterError as exc:
        messages.error(request, f"Not started: {exc}")
        return redirect(reverse("coverage_page", args=[study.slug]))
    run = {"version": version} if version else {}
    result_job_start(study=study, kind=ResultKind.COVERAGE, key=coverage_key(version=version), params=run,
                     user=request.user)  # fmt: skip
    return redirect(reverse("coverage_page", args=[study.slug]) + (f"?{urlencode(run)}" if run else ""))


def _download(study: Study, name: str, content: str) -> HttpResponse:
    response = HttpResponse(content, content_type=FORMATS["json"])
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{name}.json"'
    return response
