"""The report of a study's analysis: one button on the analysis page starts a report job (progress on the
page), and the finished job's zip is downloaded from here.

Anyone who may read the study's analysis may build its report: the job writes no study data, only a file that
holds what the analysis page already shows (blind coders are refused, as on the analysis page).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotate.analysis.params import ParameterError
from annotate.models import Job, JobStatus, Study
from annotate.reports.services import PARAM_KEYS, report_file_path, report_start
from annotate.views.access import study_view


@require_POST
@study_view("read", report=True)
def report_run(request: HttpRequest, study: Study) -> HttpResponse:
    """Start the report job with the analysis page's parameters, then follow its progress on that page."""
    raw = {k: request.POST.get(k) for k in PARAM_KEYS}
    try:
        job = report_start(study=study, user=request.user, raw=raw)
    except ParameterError as exc:
        messages.error(request, f"No report: {exc}")
        return redirect(reverse("analysis_page", args=[study.slug]))
    query = {k: v for k, v in raw.items() if v}
    query["report_job"] = job.pk
    return redirect(reverse("analysis_page", args=[study.slug]) + f"?{urlencode(query)}#report")


@require_GET
@study_view("read", report=True)
def report_download(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    job = get_object_or_404(Job, pk=pk, study=study, kind="report", status=JobStatus.SUCCESS)
    path = report_file_path(job)
    if not path.exists():
        raise Http404("The report file is gone; build the report again.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=f"{study.slug}-report.zip",
                        content_type="application/zip")  # fmt: skip


def report_job_for(request: HttpRequest, study: Study) -> Job | None:
    """The report job named by `?report_job=` on the analysis page, if it is this study's."""
    pk = request.GET.get("report_job", "")
    return Job.objects.filter(pk=int(pk), study=study, kind="report").first() if pk.isdigit() else None
