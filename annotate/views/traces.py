"""The trace viewer's fragments (windows of steps, a step's whole text) and the trace upload."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotate.imports.uploads import upload_max_bytes
from annotate.models import Document, Study
from annotate.traces.parsers import FORMATS
from annotate.traces.selectors import WINDOW, step_text, trace_window
from annotate.traces.services import trace_uploads_start
from annotate.views.access import study_view


def _int(value: str | None, default: int = 0) -> int:
    return int(value) if value and value.isdigit() else default


@require_GET
@study_view("read")
def trace_steps(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """A window of a trace's steps (htmx: appended below the last one, or replacing them for a search)."""
    document = get_object_or_404(Document.objects.only("pk", "study_id", "meta", "kind"), pk=pk, study=study)
    start, query = _int(request.GET.get("start")), request.GET.get("q", "")
    window = trace_window(
        document,
        start=start,
        limit=WINDOW,
        query=query,
        agent=request.GET.get("agent", ""),
        errors_only=request.GET.get("errors") == "1",
    )
    context = {
        "study": study,
        "trace": window,
        "markable": request.GET.get("markable") == "1",
        "appending": request.GET.get("more") == "1",  # a next window, appended below the loaded ones
    }
    return render(request, "annotate/partials/_trace_steps.html", context)


@require_GET
@study_view("read")
def trace_step_text(request: HttpRequest, study: Study, pk: int, index: int, part: str) -> HttpResponse:
    """One step's whole input, output or error as plain text (the page inserts it as text, never as HTML)."""
    document = get_object_or_404(Document.objects.only("pk", "study_id"), pk=pk, study=study)
    text = step_text(document, index, part)
    if text is None:
        raise Http404("No such step.")
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_POST
@study_view("owner")
def trace_upload(request: HttpRequest, study: Study) -> HttpResponse:
    """Upload trace files (OTLP, OpenInference, Langfuse, Phoenix, Who&When or MAST); each file's import runs as its
    own Job."""
    context = {
        "study": study,
        "max_upload_mb": settings.FAULTLINE_MAX_UPLOAD_MB,
        "max_bytes": upload_max_bytes(),
        "trace_formats": FORMATS,
        "trace_format": request.POST.get("format", ""),
    }
    try:
        jobs = trace_uploads_start(
            study=study,
            user=request.user,
            uploaded_files=request.FILES.getlist("file"),
            fmt=request.POST.get("format", ""),
        )
    except ValidationError as exc:
        context["trace_error"] = " ".join(exc.messages)
        return render(request, "annotate/partials/_trace_import.html", context, status=200 if request.htmx else 400)
    if request.htmx:
        for job in jobs:
            job.refresh_from_db()  # an eager (broker-less) run has already finished it
        response = render(request, "annotate/partials/_trace_import.html", {**context, "jobs": jobs})
        if any(job.finished for job in jobs):
            response["HX-Trigger"] = "faultline:imported"  # the study page refreshes its counts
        return response
    return redirect("job_status", pk=jobs[0].pk) if len(jobs) == 1 else redirect("study_job_list", study.slug)
