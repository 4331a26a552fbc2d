"""Study membership checks shared by every study-scoped view.

A non-member gets 404 (the study's existence is not revealed), a member
without the needed role gets 403.
"""

from __future__ import annotations

from functools import wraps

from django.core.exceptions import PermissionDenied
from django.http import Http404

from annotate.coding.visibility import check_reports
from annotate.models import Membership, Role
from lib.db.prepared import Prepared

LEVELS = ("read", "write", "adjudicate", "owner")

# Every study page and API request asks this first: compiled once (lib.db.prepared).
_MEMBERSHIP = Prepared(
    lambda slug, user_id: Membership.objects.select_related("study", "study__codebook").filter(
        study__slug=slug, user_id=user_id
    )[:1],
    slug=str,
    user_id=int,
)


def membership_for(user, slug: str) -> Membership:
    if not user.is_authenticated:
        raise Http404("No such study")
    membership = _MEMBERSHIP.first(slug=str(slug), user_id=user.pk)
    if membership is None:
        raise Http404("No such study")
    return membership


def check_level(membership: Membership, level: str) -> None:
    allowed = {
        "read": True,
        "write": membership.can_write,
        "adjudicate": membership.can_adjudicate,
        "owner": membership.role == Role.OWNER,
    }[level]
    if not allowed:
        raise PermissionDenied(f"Your role in this study ({membership.role}) does not allow this.")


def study_view(level: str = "read", *, report: bool = False):
    """Resolve `slug` to a study the user belongs to, at `level`, and pass it on.

    The view is called as view(request, study, *args) with request.membership set.
    `report`: the page shows reports built from everyone's codings, which blinding
    keeps from coders of a blind study (annotate.visibility.check_reports).
    """
    assert level in LEVELS

    def decorator(view):
        @wraps(view)
        def wrapper(request, slug, *args, **kwargs):
            membership = membership_for(request.user, slug)
            check_level(membership, level)
            if report:
                check_reports(membership)
            request.membership = membership
            return view(request, membership.study, *args, **kwargs)

        return wrapper

    return decorator
