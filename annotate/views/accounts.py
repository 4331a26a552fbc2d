"""Joining by invitation, and logging out everywhere. Password change and reset are Django's auth views."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotate.studies.forms import InvitationAcceptForm
from annotate.studies.members import InvitationInvalid, invitation_accept, invitation_for_token, sessions_revoke_all

BACKEND = "django.contrib.auth.backends.ModelBackend"


@login_not_required
@require_http_methods(["GET", "POST"])
def invitation_accept_view(request: HttpRequest, token: str) -> HttpResponse:
    """Open without a login: a newcomer chooses a username and password; a logged-in user just joins."""
    try:
        invitation = invitation_for_token(token)
    except InvitationInvalid as exc:
        return render(request, "registration/invitation_invalid.html", {"reason": str(exc)}, status=410)
    signed_in = request.user.is_authenticated
    form = InvitationAcceptForm(
        None if signed_in else (request.POST or None), initial={"username": invitation.username_hint}
    )
    if request.method == "POST" and (signed_in or form.is_valid()):
        try:
            if signed_in:
                membership = invitation_accept(token=token, user=request.user)
            else:
                data = form.cleaned_data
                membership = invitation_accept(token=token, username=data["username"], password=data["password1"])
                login(request, membership.user, backend=BACKEND)
        except InvitationInvalid as exc:
            return render(request, "registration/invitation_invalid.html", {"reason": str(exc)}, status=410)
        messages.success(
            request, f"Welcome to {membership.study.name}: you are {membership.get_role_display().lower()}."
        )
        return redirect("study_overview", slug=membership.study.slug)
    context = {"invitation": invitation, "form": form, "signed_in": signed_in}
    return render(request, "registration/invitation_accept.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
def account_page(request: HttpRequest) -> HttpResponse:
    """The account page: links to change the password, and log out everywhere (POST, with the password)."""
    error = ""
    if request.method == "POST":
        try:
            revoked = sessions_revoke_all(user=request.user, password=request.POST.get("password", ""))
        except ValidationError as exc:
            error = " ".join(exc.messages)
        else:
            logout(request)
            messages.success(request, f"Logged out everywhere; {revoked} API token(s) revoked. Log in again here.")
            return redirect("login")
    return render(request, "registration/account.html", {"error": error}, status=400 if error else 200)
