"""The triage board: open incidents grouped by responsibility source, moved new -> triaged -> resolved."""

from __future__ import annotations

import json
import re

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotate.coding.forms import CodingForm
from annotate.coding.selectors import codebook_picker
from annotate.coding.services import CodingConflict, EpisodeFull, coding_save
from annotate.incidents.selectors import (
    AGES,
    STATUS_FILTERS,
    BoardFilters,
    incident_board,
    responsibilities,
    similar_incidents,
)
from annotate.incidents.services import (
    MAX_BULK,
    SEVERITIES,
    incident_move,
    incident_transfer_targets,
    incidents_bulk_move,
    incidents_transfer,
)
from annotate.models import Coding, Confidence, Document, DocumentKind, Episode, Membership, Role, Study, TriageStatus
from annotate.suggestions.selectors import suggestion_confident
from annotate.traces.selectors import has_steps, trace_window
from annotate.views.access import study_view
from annotate.views.coding import episode_text

# A screenshot sent inline is shown only if it is plainly a base64 raster image.
DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")
SHOW_CHARS = 100_000


def _board_context(request: HttpRequest, study: Study, data) -> dict:
    f = BoardFilters.from_query(data)
    groups, total = incident_board(study, f)
    services = study.documents.filter(kind=DocumentKind.INCIDENT).values_list("cluster", flat=True).distinct()
    assignees = Membership.objects.filter(study=study, role__in=(Role.OWNER, Role.CODER)).select_related("user")
    return {
        "study": study, "membership": request.membership, "groups": groups, "total": total, "filters": f,
        "services": sorted(set(services)), "severities": SEVERITIES, "ages": list(AGES),
        "statuses": list(STATUS_FILTERS), "assignees": [m.user for m in assignees],
        "types": study.codebook.failure_types.order_by("order").only("code", "name"), "selected": set(),
        "transfer_targets": incident_transfer_targets(study=study, user=request.user),
    }  # fmt: skip


@require_GET
@study_view("read")
def triage_board(request: HttpRequest, study: Study) -> HttpResponse:
    context = _board_context(request, study, request.GET)
    template = "annotate/partials/_triage_board.html" if request.htmx else "annotate/triage_board.html"
    return render(request, template, context)


def _member(study: Study, user_id: str):
    if not user_id.isdigit():
        return None
    member = Membership.objects.filter(study=study, user_id=int(user_id)).select_related("user").first()
    return member.user if member else None


@require_POST
@study_view("write")
def incident_bulk(request: HttpRequest, study: Study) -> HttpResponse:
    """Assign, move or close the incidents selected on the board, all or none (incidents_bulk_move)."""
    ids = [int(i) for i in request.POST.getlist("ids")[: MAX_BULK + 1] if i.isdigit()]
    action = request.POST.get("action", "")
    error, done = "", ""
    if action == "transfer":
        error, done = _transfer(request, study, ids)
    else:
        error, done = _bulk_move(request, study, ids, action)
    if request.htmx:
        context = {**_board_context(request, study, request.POST), "bulk_error": error, "bulk_done": done,
                   "selected": set(ids) if error else set()}  # fmt: skip
        return render(request, "annotate/partials/_triage_board.html", context, status=400 if error else 200)
    if error:
        messages.error(request, f"Not changed: {error}")
    else:
        messages.success(request, done)
    return redirect("triage_board", slug=study.slug)


def _errors(exc: ValidationError) -> str:
    return " ".join(" ".join(v) for v in exc.message_dict.values())


def _transfer(request: HttpRequest, study: Study, ids: list[int]) -> tuple[str, str]:
    target = Study.objects.filter(slug=request.POST.get("bulk_target", "")[:60]).first()
    if target is None:
        return "Choose the study to move them to.", ""
    try:
        n = incidents_transfer(
            study=study, user=request.user, document_ids=ids, target=target, note=request.POST.get("note", "")[:5000]
        )
    except ValidationError as exc:
        return _errors(exc), ""
    return "", f"Moved {n} incident{'s' if n != 1 else ''} to {target.name}."


def _bulk_move(request: HttpRequest, study: Study, ids: list[int], action: str) -> tuple[str, str]:
    try:
        events = incidents_bulk_move(
            study=study, user=request.user, document_ids=ids, action=action,
            to_status=request.POST.get("bulk_status", ""),
            assignee=_member(study, request.POST.get("bulk_assignee", "")),
            note=request.POST.get("note", "")[:5000],
        )  # fmt: skip
    except ValidationError as exc:
        return _errors(exc), ""
    verb = {"assign": "Assigned", "close": "Closed"}.get(action, "Moved")
    where = ""
    if action in ("assign", "move"):
        where = f" to {events[0].assignee.get_username() if action == 'assign' else events[0].to_status}"
    return "", f"{verb} {len(events)} incident{'s' if len(events) != 1 else ''}{where}."


@require_POST
@study_view("write")
def incident_move_view(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    document = get_object_or_404(Document, study=study, kind=DocumentKind.INCIDENT, pk=pk)
    assignee = _member(study, request.POST.get("assignee", ""))
    error = ""
    try:
        incident_move(
            document=document, user=request.user, to_status=request.POST.get("status", ""), assignee=assignee,
            note=request.POST.get("note", "")[:5000],
        )  # fmt: skip
    except ValidationError as exc:
        error = " ".join(" ".join(v) for v in exc.message_dict.values())
    if request.htmx:
        context = {**_board_context(request, study, request.POST), "error": error, "error_for": document.pk}
        return render(request, "annotate/partials/_triage_board.html", context, status=400 if error else 200)
    if error:
        messages.error(request, f"{document.title[:80]}: {error}")
    else:
        messages.success(request, f"Moved “{document.title[:80]}” to {request.POST.get('status')}.")
    if request.POST.get("next") == "detail":
        return redirect("incident_detail", slug=study.slug, pk=document.pk)
    return redirect("triage_board", slug=study.slug)


def _artifact_views(document: Document) -> list[dict]:
    out = []
    for a in document.artifacts.all():
        image = a.content.strip() if a.kind == "screenshot" and DATA_IMAGE.match(a.content.strip()) else ""
        out.append({"artifact": a, "image": image, "text": "" if image else a.content[:SHOW_CHARS],
                    "truncated": not image and len(a.content) > SHOW_CHARS})  # fmt: skip
    return out


@require_GET
@study_view("read")
def incident_detail(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    document = get_object_or_404(
        Document.objects.select_related("assignee"), study=study, kind=DocumentKind.INCIDENT, pk=pk
    )
    trace = document.raw.get("trace") if isinstance(document.raw, dict) else None
    context = {
        "study": study, "membership": request.membership, "incident": document,
        "responsibility": responsibilities(study, [document])[document.pk],
        "artifacts": _artifact_views(document),
        "events": document.triage_events.select_related("actor", "assignee"),
        "trace_json": json.dumps(trace, indent=2, ensure_ascii=False)[:SHOW_CHARS] if trace is not None else "",
        "trace": trace_window(document) if has_steps(document) else None,
        "similar": similar_incidents(study, document),
        "statuses": TriageStatus.choices,
        "assignees": [m.user for m in Membership.objects.filter(study=study, role__in=(Role.OWNER, Role.CODER))
                      .select_related("user")],
        "episode": document.episodes.order_by("order").first(),
    }  # fmt: skip
    if context["episode"] is not None and request.membership.can_write:
        context.update(_code_context(request, study, context["episode"]))
    return render(request, "annotate/incident_detail.html", context)


def _code_context(request: HttpRequest, study: Study, episode: Episode) -> dict:
    """The triager's codes form: their own coding if they have one, else the latest suggestion's codes."""
    picker = codebook_picker(study.codebook)
    mine = Coding.objects.filter(episode=episode, coder=request.user).first()
    suggestion = episode.suggestions.filter(error="", not_a_failure=False, failure_type__isnull=False)
    suggestion = suggestion.order_by("-created_at").first()
    basis = mine or suggestion
    picker.attach(basis, suggestion)
    chosen = {axis: getattr(basis, axis, None) for axis in ("failure_type", "source", "stage", "capability")}
    groups = [
        (axis, label, [(v, chosen[axis] is not None and v.pk == chosen[axis].pk) for v in values])
        for axis, label, values in picker.groups
    ]
    return {
        "picker": picker, "mine": mine, "suggestion": suggestion, "code_groups": groups,
        "confident": suggestion_confident(suggestion, study),
        "confidence_choices": Confidence.choices,
        "type_options": picker.type_options(chosen["failure_type"].code if chosen["failure_type"] else ""),
        # The coding page's type picker (_type_picker.html) reads these.
        "chosen_type": picker.type_by_code.get(chosen["failure_type"].code) if chosen["failure_type"] else None,
        "v": {"needs_new_type": bool(mine and mine.needs_new_type)}, "errors": {},
    }  # fmt: skip


@require_POST
@study_view("write")
def incident_code(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Accept or correct the suggested codes from the incident page, through the coding page's save (with history)."""
    document = get_object_or_404(Document, study=study, kind=DocumentKind.INCIDENT, pk=pk)
    episode = get_object_or_404(Episode.objects.select_related("document"), document=document, order=0)
    episode.study = study
    picker = codebook_picker(study.codebook)
    has_coding = Coding.objects.filter(episode=episode, coder=request.user).exists()
    form = CodingForm(request.POST, picker=picker, episode=episode, text=episode_text(episode))
    try:
        if not form.is_valid():
            raise ValidationError([e for errors in form.errors.values() for e in errors])
        coding = coding_save(
            episode=episode, coder=request.user, values=form.values(), version=form.cleaned_data["version"] or None,
            from_suggestion=form.cleaned_data["from_suggestion"], has_coding=has_coding,
        )  # fmt: skip
    except (CodingConflict, EpisodeFull) as exc:
        messages.error(request, f"Not saved: {exc}")
    except ValidationError as exc:
        messages.error(request, "Not saved: " + " ".join(exc.messages))
    else:
        picker.attach(coding)
        messages.success(
            request,
            f"Coded: {coding.source.name}, {coding.failure_type.code} {coding.failure_type.name} "
            f"(version {coding.version}, kept in the episode's history).",
        )
    return redirect(reverse("incident_detail", args=[study.slug, document.pk]) + "#code-h")
