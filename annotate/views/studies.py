from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..access import study_view
from ..coding_selectors import study_progress
from ..models import Study
from ..selectors import memberships_for_user, study_counts


@require_GET
def study_list(request: HttpRequest) -> HttpResponse:
    return render(request, "annotate/study_list.html", {"memberships": memberships_for_user(request.user)})


@require_GET
@study_view("read")
def study_overview(request: HttpRequest, study: Study) -> HttpResponse:
    context = {
        "study": study,
        "membership": request.membership,
        "counts": study_counts(study),
        "members": study.memberships.select_related("user").order_by("role", "user__username"),
        "progress": study_progress(study, request.membership),
    }
    return render(request, "annotate/study_overview.html", context)
