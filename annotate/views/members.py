from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..access import study_view
from ..forms import MemberForm
from ..models import Role, Study
from ..services import membership_set


@require_http_methods(["GET", "POST"])
@study_view("owner")
def study_members(request: HttpRequest, study: Study) -> HttpResponse:
    form = MemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.cleaned_data["user"]
        owners = study.memberships.filter(role=Role.OWNER).exclude(user=user)
        if user == request.user and form.cleaned_data["role"] != Role.OWNER and not owners.exists():
            form.add_error("role", "A study needs at least one owner.")
        else:
            membership_set(
                study=study, user=user, role=form.cleaned_data["role"], adjudicator=form.cleaned_data["adjudicator"]
            )
            messages.success(request, f"{user.get_username()} is now {form.cleaned_data['role']} of {study.slug}.")
            return redirect("study_members", slug=study.slug)
    members = study.memberships.select_related("user").order_by("role", "user__username")
    status = 400 if request.method == "POST" else 200
    return render(
        request, "annotate/study_members.html", {"study": study, "form": form, "members": members}, status=status
    )
