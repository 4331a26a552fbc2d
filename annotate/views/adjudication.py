"""Adjudication: the list of episodes whose coders disagree, and the side-by-side page that settles one."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotate.coding.adjudication import adjudication_save
from annotate.coding.codebook_moves import readjudications, recode_note
from annotate.coding.forms import AdjudicationForm
from annotate.coding.labels import disagreeing_axes
from annotate.coding.selectors import (
    AXIS_LABELS,
    DISAGREEMENT_AXES,
    Picker,
    codebook_picker,
    coding_code,
    disagreeing_episodes,
    disagreement_page,
    episode_codings,
    side_by_side,
)
from annotate.coding.visibility import coding_visibility
from annotate.models import Adjudication, Study
from annotate.traces.selectors import has_steps, trace_summary_of, trace_window
from annotate.views.access import study_view
from annotate.views.coding import DISPLAY_LIMIT, axis_groups, episode_text, study_episode

PAGE = 25


def _int(value: str | None) -> int:
    try:
        return max(int(value or 0), 0)
    except ValueError:
        return 0


@require_GET
@study_view("adjudicate")
def adjudication_list(request: HttpRequest, study: Study) -> HttpResponse:
    picker = codebook_picker(study.codebook)
    axis = request.GET.get("axis", "")
    axis = axis if axis in DISAGREEMENT_AXES else ""
    type_code = request.GET.get("type", "")
    failure_type = picker.type_by_code.get(type_code)
    done = request.GET.get("state") == "adjudicated"
    rows, next_after = disagreement_page(
        study, picker, axis=axis, failure_type_id=failure_type.pk if failure_type else None,
        adjudicated=done, after=_int(request.GET.get("after")), limit=PAGE,
    )  # fmt: skip
    episodes_url = reverse("episode_detail", args=[study.slug, 0]).removesuffix("0/")
    context = {
        "study": study, "picker": picker, "rows": rows, "episodes_url": episodes_url, "next_after": next_after,
        "axis": axis,
        "type_code": type_code if failure_type else "", "done": done, "type_options": picker.type_options(type_code),
        "unknown_type": type_code if type_code and not failure_type else "", "axis_labels": AXIS_LABELS,
    }  # fmt: skip
    if request.htmx:
        return render(request, "annotate/partials/_adjudication_rows.html", context)
    context["redecide"] = readjudications(study)
    return render(request, "annotate/adjudication_list.html", context)


def _initial(codings, adjudication: Adjudication | None, source_coding, picker: Picker) -> dict:
    """Start from the adjudication, or a chosen coder's codes, or the codes all coders agree on."""
    base = adjudication or source_coding
    if base is not None:
        values = {a: coding_code(base, a, picker) for a in ("source", "stage", "capability")}
        values["failure_type"] = picker.type_code(base.failure_type_id)
        values.update(not_a_failure=base.not_a_failure, needs_new_type=base.needs_new_type)
        values["rationale"] = adjudication.rationale if adjudication else ""
        values.update(_attribution_of(base))
        return values
    split = set(disagreeing_axes(codings))
    first = codings[0] if codings else None
    values = {"rationale": ""}
    if first is not None:
        for a in ("source", "stage", "capability"):
            values[a] = "" if a in split else picker.axis_code(getattr(first, f"{a}_id"))
        values["failure_type"] = "" if "failure_type" in split else picker.type_code(first.failure_type_id)
        if len({(c.decisive_step, c.responsible_agent.strip().lower()) for c in codings}) == 1:
            values.update(_attribution_of(first))
    return values


def _attribution_of(row) -> dict:
    """A coding's or adjudication's attribution as form values (empty when it has none)."""
    step = row.decisive_step
    return {"decisive_step": "" if step is None else step, "responsible_agent": row.responsible_agent}


@require_http_methods(["GET", "POST"])
@study_view("adjudicate")
def adjudication_page(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    episode = study_episode(study, pk)
    codings = episode_codings(episode)
    has_own = any(c.coder_id == request.user.pk for c in codings)
    if not coding_visibility(request.membership).on_episode(episode, has_own=has_own):
        raise PermissionDenied("This episode is still being coded blind; adjudicate it once it has all its codings.")
    picker = codebook_picker(study.codebook)
    adjudication = Adjudication.objects.filter(episode=episode).select_related("adjudicator").first()
    form = AdjudicationForm(request.POST or None, picker=picker)
    if request.method == "POST" and form.is_valid():
        try:
            adjudication_save(episode=episode, adjudicator=request.user, values=form.values())
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name if name in form.fields else None, errors)
        else:
            messages.success(request, f"Episode {episode.pk} adjudicated.")
            return _after_adjudication(request, study, episode)
    source = next((c for c in codings if str(c.pk) == request.GET.get("from")), None)
    values = request.POST.dict() if request.method == "POST" else _initial(codings, adjudication, source, picker)
    context = {
        "study": study, "episode": episode, "document": episode.document, "codings": codings, "picker": picker,
        "adjudication": adjudication, "v": values, "errors": form.errors, "compare": side_by_side(codings, picker),
        "text": episode_text(episode)[:DISPLAY_LIMIT], "groups": axis_groups(picker, values, form.errors),
        "type_options": picker.type_options(values.get("failure_type")),
        "chosen_type": picker.type_by_code.get(values.get("failure_type") or ""),
        "left": disagreeing_episodes(study).count(), "recode": recode_note(adjudication) if adjudication else None,
        "trace_agents": trace_summary_of(episode.document).get("agents") if has_steps(episode.document) else None,
        "trace": trace_window(episode.document) if has_steps(episode.document) else None,
    }  # fmt: skip
    return render(request, "annotate/adjudicate.html", context, status=400 if request.method == "POST" else 200)


def _after_adjudication(request: HttpRequest, study: Study, episode) -> HttpResponse:
    """On to the next episode still to adjudicate (after this one, else from the start), or back to the list."""
    pending = disagreeing_episodes(study).values_list("pk", flat=True)
    following = pending.filter(pk__gt=episode.pk).first() or pending.first()
    if following is None:
        return redirect("adjudication_list", slug=study.slug)
    return redirect("adjudication_page", slug=study.slug, pk=following)
