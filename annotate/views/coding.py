"""The coding page: one episode, the coder's form, and (once they have coded it) the others' codings."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from annotate.coding.codebook_moves import recode_note
from annotate.coding.experiment import exposure_offer, exposure_record, suggestions_guarded
from annotate.coding.forms import CodingForm
from annotate.coding.queue import lease_claim, lease_room, live_lease_of
from annotate.coding.selectors import Picker, codebook_picker, episode_codings
from annotate.coding.services import CodingConflict, EpisodeFull, coding_save
from annotate.coding.visibility import coding_visibility
from annotate.models import Coding, Confidence, Episode, Study
from annotate.traces.selectors import trace_summary_of, trace_window
from annotate.views.access import study_view
from annotate.views.queue import next_url
from lib.db.prepared import MAX_ID, Prepared

# Rendering a multi-megabyte pasted log would stall the page; the coder gets the
# head of it and the link to the original.
DISPLAY_LIMIT = 100_000
FORM_FIELDS = (
    "failure_type", "source", "stage", "capability", "not_a_failure", "not_a_failure_reason",
    "needs_new_type", "confidence", "memo", "evidence", "version", "from_suggestion", "decisive_step",
    "responsible_agent",
)  # fmt: skip


def episode_text(episode: Episode) -> str:
    """The text a coder codes: the episode's excerpt if it has one, else the whole document body."""
    return episode.excerpt or episode.document.body


def study_episode(study: Study, pk: int, *, coder=None, lease: bool = False) -> Episode:
    """The study's episode `pk` with its document. With `coder`, the same query also reads the id of
    their coding (`my_coding`, None if they have none) and, with `lease`, whether they hold a live
    lease on it (`leased`)."""
    if coder is None:
        episode = get_object_or_404(Episode.objects.select_related("document"), pk=pk, study=study)
    else:  # every coding page and save asks this: compiled once (lib.db.prepared)
        found = pk <= MAX_ID and (
            _EPISODE_LEASED.first(study_id=study.pk, pk=pk, coder_id=coder.pk, now=timezone.now())
            if lease
            else _EPISODE.first(study_id=study.pk, pk=pk, coder_id=coder.pk)
        )
        if not found:
            raise Http404("No Episode matches the given query.")
        episode = found
    episode.study = study
    return episode


def _coder_episode(study_id: int, pk: int, coder_id: int, now: datetime | None = None) -> QuerySet[Episode]:
    """The episode with its document and the id of the coder's coding; given `now`, whether they hold a live lease."""
    own = Coding.objects.filter(episode=OuterRef("pk"), coder_id=coder_id).values("pk")[:1]
    episodes = Episode.objects.select_related("document").annotate(my_coding=Subquery(own))
    if now is not None:
        episodes = episodes.annotate(leased=live_lease_of(coder_id, now=now))
    return episodes.filter(pk=pk, study_id=study_id).order_by()[:1]


_EPISODE = Prepared(
    lambda study_id, pk, coder_id: _coder_episode(study_id, pk, coder_id), study_id=int, pk=int, coder_id=int
)
_EPISODE_LEASED = Prepared(_coder_episode, study_id=int, pk=int, coder_id=int, now=datetime)


def axis_groups(picker: Picker, values: dict, errors) -> list[tuple]:
    """(axis, label, [(value, checked)], errors) for the source, stage and capability controls."""
    return [
        (axis, label, [(value, value.code == values.get(axis)) for value in axis_values], errors.get(axis))
        for axis, label, axis_values in picker.groups
    ]


def _values_of(coding: Coding | None, picker: Picker) -> dict:
    if coding is None:
        return {"confidence": "medium", "version": ""}
    return {
        "failure_type": picker.type_code(coding.failure_type_id),
        "source": picker.axis_code(coding.source_id),
        "stage": picker.axis_code(coding.stage_id),
        "capability": picker.axis_code(coding.capability_id),
        "not_a_failure": coding.not_a_failure,
        "not_a_failure_reason": coding.not_a_failure_reason,
        "needs_new_type": coding.needs_new_type,
        "confidence": coding.confidence,
        "memo": coding.memo,
        "evidence": coding.evidence,
        "version": coding.version,
        "from_suggestion": coding.from_suggestion_id or "",
        "decisive_step": "" if coding.decisive_step is None else coding.decisive_step,
        "responsible_agent": coding.responsible_agent,
    }


def _posted_values(request: HttpRequest) -> dict:
    values = {name: request.POST.get(name, "") for name in FORM_FIELDS}
    values["not_a_failure"] = bool(request.POST.get("not_a_failure"))
    values["needs_new_type"] = bool(request.POST.get("needs_new_type"))
    return values


def _render(request, study, episode, picker, mine, values, *, status=200, **extra) -> HttpResponse:
    has_own = mine is not None
    visibility = coding_visibility(request.membership, on_coding_page=True)
    visible = visibility.on_episode(episode, has_own=has_own)
    others = [c for c in episode_codings(episode) if c.coder_id != request.user.pk] if visible else []
    picker.attach(*others, extra.get("conflict"))
    text = episode_text(episode)
    errors = extra.get("errors") or {}
    groups = axis_groups(picker, values, errors)
    context = {
        "study": study, "episode": episode, "document": episode.document, "picker": picker, "mine": mine,
        "v": values, "groups": groups, "confidence_choices": Confidence.choices,
        "non_field_errors": errors.get("__all__"),
        "chosen_type": picker.type_by_code.get(values.get("failure_type") or ""),
        "type_options": picker.type_options(values.get("failure_type")),
        "others": others, "blind_hidden": not visible, "text": text[:DISPLAY_LIMIT],
        "truncated": len(text) > DISPLAY_LIMIT, "errors": {}, "has_place": True, **extra,
    }  # fmt: skip
    offer = exposure_offer(study=study, coder=request.user, episode=episode)
    # The panel loads at once unless the guard still holds (a first choice already stored lifts it).
    guard = suggestions_guarded(study, offer, episode=episode, coder=request.user, has_own=has_own)
    context.update(suggest_guard=guard, exposure_token=offer.token if offer else "")
    context.update(_trace_context(request, episode, visible))
    context["recode"] = recode_note(mine) if mine is not None else None
    template = "annotate/partials/_coding_panel.html" if request.htmx else "annotate/coding.html"
    return render(request, template, context, status=status)


def _trace_context(request, episode: Episode, visible: bool) -> dict:
    """The trace viewer's first window (full page only), its agents for the form, and the reference if visible."""
    document = episode.document
    summary = trace_summary_of(document)
    reference = episode.reference or None
    out = {
        "trace_agents": summary.get("agents", []) if summary else None,
        "reference": reference if visible else None,
        "reference_hidden": bool(reference) and not visible,
    }
    if summary and not request.htmx:
        out["trace"] = trace_window(document)
    return out


@require_http_methods(["GET", "POST"])
@study_view("write")
def coding_page(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    get = request.method == "GET"
    episode = study_episode(study, pk, coder=request.user, lease=get)
    picker = codebook_picker(study.codebook)
    # Fetched only when the episode's read found one: a first coding costs no query for it.
    mine = Coding.objects.filter(pk=episode.my_coding).first() if episode.my_coding else None
    if not get:
        return _coding_post(request, study, episode, picker, mine)
    # A GET changes nothing: the place is claimed by "next", by the form's first interaction
    # (coding_claim) or by the save itself.
    has_place = mine is not None or lease_room(episode=episode, coder=request.user, leased=episode.leased)
    closed = "" if has_place else str(EpisodeFull(episode))
    return _render(request, study, episode, picker, mine, _values_of(mine, picker), has_place=has_place, closed=closed)


def _coding_post(request, study, episode, picker, mine) -> HttpResponse:
    form = CodingForm(request.POST, picker=picker, episode=episode, text=episode_text(episode))
    values, extra = _posted_values(request), {}
    if form.is_valid():
        try:
            coding = coding_save(
                episode=episode, coder=request.user, values=form.values(),
                version=form.cleaned_data["version"] or None, from_suggestion=form.cleaned_data["from_suggestion"],
                has_coding=mine is not None,
            )  # fmt: skip
        except CodingConflict as exc:
            values["version"] = exc.current.version if exc.current else ""
            extra = {"conflict": exc.current, "conflict_values": _values_of(exc.current, picker)}
            return _render(request, study, episode, picker, exc.current, values, status=409, **extra)
        except EpisodeFull as exc:
            return _render(request, study, episode, picker, mine, values, status=409, full_error=str(exc))
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name if name in form.fields else None, errors)
        else:
            if mine is None:
                exposure_record(
                    study=study, episode=episode, coder=request.user, token=request.POST.get("exposure", "")
                )
            return _saved(request, study, episode, picker, coding, first=mine is None)
    return _render(request, study, episode, picker, mine, values, status=400, errors=form.errors)


def _saved(request, study, episode, picker, coding, *, first: bool) -> HttpResponse:
    if request.POST.get("action") == "next":
        back = reverse("coding_page", args=[study.slug, episode.pk])
        saved = format_html('Saved your coding of episode {}. <a href="{}">Back to it</a>', episode.pk, back)
        messages.success(request, saved)
        # A first coding ended the coder's lease here, so they hold none to resume: no lookup.
        url = next_url(request, study, resume=not first)
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    if request.htmx:
        episode.n_codings = Episode.objects.values_list("n_codings", flat=True).get(pk=episode.pk)
        response = _render(request, study, episode, picker, coding, _values_of(coding, picker), saved=True)
        return trigger_client_event(response, "faultline:saved")
    messages.success(request, f"Saved (version {coding.version}).")
    return redirect("coding_page", slug=study.slug, pk=episode.pk)


@require_POST
@study_view("write")
def coding_claim(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Hold a place on the episode while the coder works on it (the form's first interaction)."""
    episode = study_episode(study, pk)
    if Coding.objects.filter(episode=episode, coder=request.user).exists() or lease_claim(
        episode=episode, coder=request.user
    ):
        return HttpResponse(status=204)
    return HttpResponse(str(EpisodeFull(episode)), status=409, content_type="text/plain; charset=utf-8")
