"""The episode page: its text, the codings the member may see, the adjudication and (owners) the history."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotate.coding.selectors import codebook_picker, episode_codings, episode_history, live_leases
from annotate.coding.visibility import coding_visibility
from annotate.models import Adjudication, Role, Study
from annotate.traces.selectors import has_steps, trace_window
from annotate.views.access import study_view
from annotate.views.coding import DISPLAY_LIMIT, episode_text, study_episode


@require_GET
@study_view("read")
def episode_detail(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    episode = study_episode(study, pk)
    picker = codebook_picker(study.codebook)
    codings = episode_codings(episode)
    has_own = any(c.coder_id == request.user.pk for c in codings)
    visibility = coding_visibility(request.membership)
    visible = visibility.on_episode(episode, has_own=has_own)
    is_owner = request.membership.role == Role.OWNER
    adjudication = Adjudication.objects.filter(episode=episode).select_related("adjudicator").first()
    picker.attach(*codings, adjudication)
    text = episode_text(episode)
    context = {
        "study": study, "episode": episode, "document": episode.document, "picker": picker,
        "membership": request.membership, "codings": codings if visible else [], "n_hidden": len(codings),
        "blind_hidden": not visible, "show_progress": visible, "has_own": has_own, "text": text[:DISPLAY_LIMIT],
        "truncated": len(text) > DISPLAY_LIMIT,
        "adjudication": adjudication if visible else None,
        "history": episode_history(episode, picker) if is_owner else None,
        "trace": trace_window(episode.document) if has_steps(episode.document) else None,
        "reference": (episode.reference or None) if visible else None,
        "reference_hidden": bool(episode.reference) and not visible,
        "leases": live_leases(study, request.membership, episode=episode), "lease_context": "episode",
        "lease_minutes": settings.FAULTLINE_LEASE_MINUTES,
    }  # fmt: skip
    return render(request, "annotate/episode.html", context)
