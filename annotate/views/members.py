"""The members page: owners invite people, change roles and the adjudicator duty, and remove members."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from annotate.models import Coding, Invitation, Membership, Role, Study
from annotate.studies.forms import InviteForm, MemberUpdateForm
from annotate.studies.members import email_configured, invitation_revoke, member_invite, member_remove, member_update
from annotate.views.access import study_view


def _context(study: Study, form: InviteForm, **extra) -> dict:
    members = list(study.memberships.select_related("user").order_by("role", "user__username"))
    codings = dict(
        Coding.objects.filter(episode__study=study).values_list("coder_id").annotate(n=Count("id")).order_by()
    )
    for m in members:
        m.n_codings = codings.get(m.user_id, 0)
    pending = study.invitations.filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())
    return {
        "study": study, "form": form, "members": members, "pending": pending, "roles": Role.choices,
        "email": email_configured(), **extra,
    }  # fmt: skip


@require_http_methods(["GET", "POST"])
@study_view("owner")
def study_members(request: HttpRequest, study: Study) -> HttpResponse:
    """GET lists the team; POST invites. A new link is shown on this response only (only its hash is kept)."""
    form = InviteForm(request.POST or None)
    if request.method != "POST" or not form.is_valid():
        return render(request, "annotate/study_members.html", _context(study, form), status=400 if form.errors else 200)
    data = form.cleaned_data
    try:
        result = member_invite(
            study=study, by=request.user, who=data["who"], role=data["role"], adjudicator=data["adjudicator"],
            accept_url=lambda token: request.build_absolute_uri(reverse("invitation_accept", args=[token])),
        )  # fmt: skip
    except ValidationError as exc:
        for name, errors in exc.message_dict.items():
            form.add_error(name if name in form.fields else None, errors)
        return render(request, "annotate/study_members.html", _context(study, form), status=400)
    if result.membership is not None:
        messages.success(request, f"{result.membership.user.get_username()} joined as {result.membership.role}.")
        return redirect("study_members", slug=study.slug)
    link = request.build_absolute_uri(reverse("invitation_accept", args=[result.token]))
    context = _context(study, InviteForm(), invite_link=link, invitation=result.invitation, emailed=result.emailed)
    response = render(request, "annotate/study_members.html", context, status=201)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@study_view("owner")
def member_update_view(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    form = MemberUpdateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one of the roles owner, coder or viewer.")
        return redirect("study_members", slug=study.slug)
    try:
        membership = member_update(study=study, membership_id=pk, **form.cleaned_data)
        messages.success(request, f"{membership.user.get_username()} is now {membership.get_role_display().lower()}.")
    except Membership.DoesNotExist as exc:
        raise Http404("No such member") from exc
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("study_members", slug=study.slug)


@require_POST
@study_view("owner")
def member_remove_view(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    try:
        membership = member_remove(study=study, membership_id=pk)
    except Membership.DoesNotExist as exc:
        raise Http404("No such member") from exc
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request, f"{membership.user.get_username()} was removed; their codings stay, attributed to them."
        )
    return redirect("study_members", slug=study.slug)


@require_POST
@study_view("owner")
def invitation_revoke_view(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    try:
        invitation = invitation_revoke(study=study, invitation_id=pk)
    except Invitation.DoesNotExist as exc:
        raise Http404("No such invitation") from exc
    messages.success(request, f"The invitation for {invitation.invitee} was withdrawn; its link no longer works.")
    return redirect("study_members", slug=study.slug)
