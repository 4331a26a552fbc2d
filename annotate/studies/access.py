"""Study membership: the one rule for who may see and do what in a study, asked by every page and API request.

A non-member gets 404 (the study's existence is not revealed), a member
without the needed role gets 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

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
