"""The study-scoped view decorator: membership and role (annotate.studies.access), and blinding for reports."""

from __future__ import annotations

from functools import wraps

from annotate.coding.visibility import check_reports
from annotate.studies.access import LEVELS, check_level, membership_for


def study_view(level: str = "read", *, report: bool = False):
    """Resolve `slug` to a study the user belongs to, at `level`, and pass it on.

    The view is called as view(request, study, *args) with request.membership set.
    `report`: the page shows reports built from everyone's codings, which blinding
    keeps from coders of a blind study (annotate.coding.visibility.check_reports).
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
