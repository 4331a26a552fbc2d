"""Study membership for the API: no token 401, non-member 404, viewer writing 403."""

from __future__ import annotations

from rest_framework import permissions
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request

from annotate.coding.visibility import BLIND_REPORT, coding_visibility
from annotate.models import Membership
from annotate.studies.access import membership_for

SAFE = permissions.SAFE_METHODS


def study_membership(request: Request, slug: str, level: str | None = None) -> Membership:
    """The user's membership of study `slug`, checked at `level` (default: read for safe methods, write otherwise).

    Raises NotFound for non-members (the study's existence is not revealed) and
    PermissionDenied when the role is too low.
    """
    from django.http import Http404

    try:
        membership = membership_for(request.user, slug)
    except Http404 as exc:
        raise NotFound("No such study.") from exc
    level = level or ("read" if request.method in SAFE else "write")
    allowed = {
        "read": True,
        "write": membership.can_write,
        "adjudicate": membership.can_adjudicate,
        "owner": membership.role == "owner",
    }[level]
    if not allowed:
        raise PermissionDenied(f"Your role in this study ({membership.role}) does not allow this.")
    return membership


class StudyMember(permissions.IsAuthenticated):
    """For views routed with a `slug` kwarg: sets request.membership, request.study and request.visibility.

    A view with `report_of_all_codings = True` (analysis, agreement, exports) is refused to members
    whom the blinding rule does not show everyone's codings.
    """

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        slug = view.kwargs.get("slug")
        if slug is None:
            return True
        membership = study_membership(request, slug, getattr(view, "required_level", None))
        request.membership = membership
        request.study = membership.study
        request.visibility = coding_visibility(membership)
        if getattr(view, "report_of_all_codings", False) and not request.visibility.sees_aggregates:
            raise PermissionDenied(BLIND_REPORT)
        return True
