"""The profile page where a user creates and revokes API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotate.models import ApiToken
from annotate.studies.tokens import token_create, token_revoke


def _tokens(user):
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")


@require_http_methods(["GET", "POST"])
def profile_tokens(request: HttpRequest) -> HttpResponse:
    """List tokens; a POST creates one and shows its key on this response only (it is never stored).

    The creating POST renders instead of redirecting: a redirect would have to
    carry the key through the session, and the key must exist nowhere but here.
    """
    context: dict = {"tokens": _tokens(request.user), "error": "", "name": ""}
    status = 200
    if request.method == "POST":
        context["name"] = request.POST.get("name", "")
        try:
            context["created"], context["key"] = token_create(user=request.user, name=context["name"])
            status = 201
        except ValidationError as exc:
            context["error"], status = " ".join(exc.message_dict.get("name", exc.messages)), 400
    response = render(request, "annotate/profile_tokens.html", context, status=status)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
def profile_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        token = token_revoke(user=request.user, token_id=pk)
    except ApiToken.DoesNotExist as exc:
        raise Http404("No such token") from exc
    if request.htmx:
        return render(request, "annotate/partials/_token_list.html", {"tokens": _tokens(request.user)})
    messages.success(request, f"Token '{token.name}' revoked.")
    return redirect("profile_tokens")
