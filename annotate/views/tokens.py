"""The profile page where a user creates and revokes API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from annotate.models import ApiToken, TokenScope
from annotate.studies.tokens import EXPIRY_CHOICES, token_create, token_expiry, token_revoke


def _tokens(user):
    tokens = list(ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at"))
    now = timezone.now()
    for t in tokens:
        t.is_expired = t.expired(now)
    return tokens


@require_http_methods(["GET", "POST"])
def profile_tokens(request: HttpRequest) -> HttpResponse:
    """List tokens; a POST creates one and shows its key on this response only (it is never stored).

    The creating POST renders instead of redirecting: a redirect would have to
    carry the key through the session, and the key must exist nowhere but here.
    """
    context: dict = {"error": "", "name": "", "scope": TokenScope.WRITE,
                     "expires_in": "", "scopes": TokenScope.choices, "expiries": EXPIRY_CHOICES}  # fmt: skip
    status = 200
    if request.method == "POST":
        post = request.POST
        context.update(name=post.get("name", ""), scope=post.get("scope", TokenScope.WRITE),
                       expires_in=post.get("expires_in", ""))  # fmt: skip
        try:
            context["created"], context["key"] = token_create(
                user=request.user, name=context["name"], scope=context["scope"],
                expires_at=token_expiry(context["expires_in"]),
            )  # fmt: skip
            status = 201
        except ValidationError as exc:
            context["error"], status = " ".join(exc.messages), 400
    context["tokens"] = _tokens(request.user)
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
