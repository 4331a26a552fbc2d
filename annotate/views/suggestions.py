"""Suggestion pages: start a batch or a retrain, the coding page's suggestion panel, rejecting, quality."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotate.coding.experiment import (
    exposure_offer,
    first_choice_record,
    study_exposure_report,
    suggestions_guarded,
    suggestions_wait_for_choice,
)
from annotate.coding.visibility import coding_visibility
from annotate.models import Coding, Episode, Study, Suggestion, SuggestionStatus
from annotate.suggestions.base import codebook_spec
from annotate.suggestions.quality import suggestion_quality
from annotate.suggestions.selectors import latest_audits, suggestion_confident
from annotate.suggestions.services import (
    default_backend,
    local_retrain_start,
    suggester_audit_start,
    suggestion_batch_start,
    suggestion_reject,
)
from annotate.views.access import study_view


def _job_started(request: HttpRequest, study: Study, start) -> HttpResponse:
    try:
        job = start()
    except ValidationError as exc:
        message = " ".join(m for ms in exc.message_dict.values() for m in ms)
        if request.htmx:
            return render(request, "annotate/partials/_suggest_error.html", {"message": message}, status=400)
        messages.error(request, message)
        return redirect("suggestion_quality_page", slug=study.slug)
    if request.htmx:
        return render(request, "annotate/partials/_job.html", {"job": job})
    return redirect("job_status", pk=job.pk)


@require_POST
@study_view("write")
def suggestion_batch(request: HttpRequest, study: Study) -> HttpResponse:
    """Start a batch of suggestions for the episodes that have none from the chosen backend yet."""
    backend = request.POST.get("backend") or None
    refresh = request.POST.get("refresh") == "1"
    return _job_started(
        request, study, lambda: suggestion_batch_start(study=study, user=request.user, backend=backend, refresh=refresh)
    )


@require_POST
@study_view("write")
def suggestion_retrain(request: HttpRequest, study: Study) -> HttpResponse:
    return _job_started(request, study, lambda: local_retrain_start(study=study, user=request.user))


@require_POST
@study_view("owner")
def suggestion_audit(request: HttpRequest, study: Study) -> HttpResponse:
    """Start the read-only audit as a job; its result is recorded for this page."""
    backend = request.POST.get("backend") or None
    return _job_started(request, study, lambda: suggester_audit_start(study=study, user=request.user, backend=backend))


@require_GET
@study_view("read", report=True)
def suggestion_quality_page(request: HttpRequest, study: Study) -> HttpResponse:
    exposure = study_exposure_report(study)
    context = {
        "study": study,
        "membership": request.membership,
        "report": suggestion_quality(study),
        "default_backend": default_backend(),
        "jobs": study.jobs.filter(kind__in=["suggest", "retrain", "audit"]).select_related("created_by")[:5],
        "local_models": study.local_models.defer("blob")[:3],
        "audits": latest_audits(study),
        "exposure": exposure if study.exposure_experiment or any(a.codings for a in exposure.arms) else None,
    }
    return render(request, "annotate/suggestion_quality.html", context)


def _panel_context(request: HttpRequest, study: Study, episode: Episode) -> dict:
    """What the panel shows: the newest usable suggestion, unless the anchoring guard still hides it
    (annotate.coding.experiment.suggestions_guarded decides, from the coder's stored first choice)."""
    has_own = Coding.objects.filter(episode=episode, coder=request.user).exists()
    offer = exposure_offer(study=study, coder=request.user, episode=episode)
    wait = suggestions_wait_for_choice(study, offer)
    guarded = suggestions_guarded(study, offer, episode=episode, coder=request.user, has_own=has_own)
    context = {
        "study": study, "episode": episode, "loaded": True, "guarded": guarded, "suggestion": None,
        "suggest_guard": wait,
    }  # fmt: skip
    if guarded:
        return context
    suggestion = Suggestion.objects.filter(episode=episode, error="").order_by("-created_at", "-pk").first()
    if suggestion is None:
        return context
    # Not confident: "no confident suggestion", candidates folded, no default Accept.
    confident = suggestion_confident(suggestion, study)
    spec = codebook_spec(study.codebook)
    names = {a: {v.code: v.name for v in spec.axes[a]} for a in spec.axes}
    # A trace episode's suggestion names one decisive step and agent: accepting any candidate fills them too.
    attribution = (
        {"decisive_step": suggestion.decisive_step, "responsible_agent": suggestion.responsible_agent}
        if suggestion.decisive_step is not None
        else {}
    )
    candidates = []
    for rank, c in enumerate(suggestion.candidates):
        t = spec.type_by_code(c["failure_type"])
        fill = {k: c[k] for k in ("failure_type", "source", "stage", "capability", "evidence")}
        fill.update(confidence=c["confidence"], from_suggestion=suggestion.pk, not_a_failure=False, **attribution)
        candidates.append(
            {
                **c,
                "rank": rank + 1,
                "type_name": t.name if t else c["failure_type"],
                "axis_names": [names[a].get(c[a], c[a]) for a in ("source", "stage", "capability")],
                "percent": round(100 * c["confidence"]),
                "fill": json.dumps(fill),
            }
        )
    # A rejection is the coder's own (SuggestionRejection). Another coder's acceptance is part of
    # their coding: blinding decides whether it shows.
    rejected_by_me = suggestion.rejections.filter(coder=request.user).exists()
    own_review = suggestion.reviewed_by_id == request.user.pk
    visibility = coding_visibility(request.membership, on_coding_page=True)
    shown_status = suggestion.status if own_review or visibility.on_episode(episode, has_own=has_own) else ""
    context.update(
        rejected_by_me=rejected_by_me,
        review_status=SuggestionStatus.REJECTED if rejected_by_me else shown_status,
        suggestion=suggestion,
        confident=confident,
        candidates=candidates,
        attribution=attribution,
        # Accepting only the step leaves the type to the coder: not linked to the suggestion.
        attribution_fill=json.dumps(attribution),
        naf_fill=json.dumps({"not_a_failure": True, "from_suggestion": suggestion.pk}),
    )
    return context


@require_GET
@study_view("write")
def suggestion_panel(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """The panel's content, fetched by htmx once the page (or, with the anchoring guard, a first choice) is there."""
    episode = get_object_or_404(Episode.objects.select_related("document"), pk=pk, study=study)
    context = _panel_context(request, study, episode)
    context["fragment"] = True
    return render(request, "annotate/partials/_suggestion_panel.html", context)


@require_POST
@study_view("write")
def suggestion_first_choice(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Record the coder's own first choice of a type (the anchoring guard's condition), then show the panel.

    The first choice stands: a later one changes nothing. A code outside the codebook is a 400 naming
    the field, and nothing is stored.
    """
    episode = get_object_or_404(Episode.objects.select_related("document", "study"), pk=pk, study=study)
    error = ""
    try:
        first_choice_record(episode=episode, coder=request.user, failure_type=request.POST.get("failure_type", ""))
    except ValidationError as exc:
        error = " ".join(m for ms in exc.message_dict.values() for m in ms)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("coding_page", slug=study.slug, pk=episode.pk)
    context = _panel_context(request, study, episode)
    context.update(fragment=True, first_choice_error=error)
    return render(request, "annotate/partials/_suggestion_panel.html", context, status=400 if error else 200)


@require_POST
@study_view("write")
def suggestion_reject_view(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Reject for this coder only. A coder the anchoring guard still keeps from the suggestion cannot
    reject it (nor see it by trying): the panel stays guarded and nothing is written."""
    suggestion = get_object_or_404(Suggestion.objects.select_related("episode"), pk=pk, episode__study=study)
    context = _panel_context(request, study, suggestion.episode)
    status = 200
    if context["guarded"]:
        status = 400
    else:
        try:
            suggestion_reject(suggestion=suggestion, user=request.user)
        except ValidationError as exc:
            messages.error(request, " ".join(m for ms in exc.message_dict.values() for m in ms))
        else:
            context = _panel_context(request, study, suggestion.episode)
            context["just_rejected"] = True
    if request.htmx:
        context["fragment"] = True
        return render(request, "annotate/partials/_suggestion_panel.html", context, status=status)
    return redirect("coding_page", slug=study.slug, pk=suggestion.episode_id)
