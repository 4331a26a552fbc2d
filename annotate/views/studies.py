from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotate.coding.selectors import live_leases, study_progress
from annotate.coding.visibility import coding_visibility
from annotate.imports.uploads import study_start
from annotate.models import Study
from annotate.studies.forms import StudyStartForm
from annotate.studies.members import codebook_from_upload, may_create_studies, study_creation_refusal
from annotate.studies.selectors import memberships_for_user, study_counts
from annotate.views.access import study_view


@require_GET
def study_list(request: HttpRequest) -> HttpResponse:
    may_create = may_create_studies(request.user)
    context = {
        "memberships": memberships_for_user(request.user),
        "may_create": may_create,
        "creation_refusal": "" if may_create else study_creation_refusal(request.user),
    }
    return render(request, "annotate/study_list.html", context)


@require_GET
@study_view("read")
def study_overview(request: HttpRequest, study: Study) -> HttpResponse:
    visibility = coding_visibility(request.membership)
    context = {
        "study": study,
        "membership": request.membership,
        "counts": study_counts(study, visible=visibility.episodes_q()),
        "counts_blind": not visibility.sees_progress,
        "members": study.memberships.select_related("user").order_by("role", "user__username"),
        "progress": study_progress(study, request.membership),
        "leases": live_leases(study, request.membership),
        "lease_context": "study",
        "lease_minutes": settings.FAULTLINE_LEASE_MINUTES,
        "sees_reports": visibility.sees_aggregates,
    }
    return render(request, "annotate/study_overview.html", context)


@require_http_methods(["GET", "POST"])
def study_new(request: HttpRequest) -> HttpResponse:
    """Start a study in the browser: the creator becomes its owner; first import files run as jobs."""
    if not may_create_studies(request.user):
        raise PermissionDenied(study_creation_refusal(request.user))
    form = StudyStartForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            codebook_data = codebook_from_upload(data["codebook_file"]) if data["codebook_file"] else None
            started = study_start(
                creator=request.user, name=data["name"], slug=data["slug"], codebook=data["codebook"],
                codebook_data=codebook_data, coders_per_episode=data["coders_per_episode"], blind=data["blind"],
                queue_order=data["queue_order"], files=request.FILES.getlist("files"),
            )  # fmt: skip
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name if name in form.fields else None, errors)
        else:
            jobs = f" {len(started.jobs)} import job(s) started." if started.jobs else ""
            messages.success(request, f"Study {started.study.name} created; you are its owner.{jobs}")
            return redirect("study_overview", slug=started.study.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotate/study_new.html", {"form": form}, status=status)
