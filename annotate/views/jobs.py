from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotate.coding.visibility import coding_visibility
from annotate.models import Job, Study
from annotate.studies.access import membership_for
from annotate.studies.selectors import study_jobs
from annotate.views.access import study_view

IMPORT_KINDS = ("import", "import_traces")  # jobs whose end changes the study's counts


@require_GET
def job_status(request: HttpRequest, pk: int) -> HttpResponse:
    """A job's progress; the fragment re-polls itself with htmx until the job ends."""
    job = get_object_or_404(Job.objects.select_related("study", "created_by"), pk=pk)
    if job.study is not None:
        membership = membership_for(request.user, job.study.slug)  # 404 for non-members
        if job.created_by_id != request.user.pk and not coding_visibility(membership).sees_aggregates:
            raise Http404("No such job")  # others' jobs carry reports of everyone's codings
    elif job.created_by_id != request.user.pk:
        raise Http404("No such job")
    template = "annotate/partials/_job.html" if request.htmx else "annotate/job.html"
    response = render(request, template, {"job": job})
    if request.htmx and job.finished and job.kind in IMPORT_KINDS:
        response["HX-Trigger"] = "faultline:imported"  # the study page refreshes its counts
    return response


@require_GET
@study_view("read")
def study_job_list(request: HttpRequest, study: Study) -> HttpResponse:
    """The study's jobs: queued, running, stalled and retried ones with their last heartbeat, then recent ones."""
    context = {"study": study, "jobs": study_jobs(study)}
    template = "annotate/partials/_jobs_table.html" if request.htmx else "annotate/study_jobs.html"
    return render(request, template, context)
