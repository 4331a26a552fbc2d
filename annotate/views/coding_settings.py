"""The owner's coding settings for a study: overlap, blinding, queue order and splits."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotate.coding.forms import CodingSettingsForm
from annotate.models import Study
from annotate.studies.coding_settings import study_coding_settings_update
from annotate.views.access import study_view


def _initial(study: Study) -> dict:
    return {
        "coders_per_episode": study.coders_per_episode,
        "blind": study.blind,
        "queue_order": study.queue_order,
        "queue_splits": study.splits_in_queue,
        "suggestions_after_first_choice": study.suggestions_after_first_choice,
        "exposure_experiment": study.exposure_experiment,
        "suggestion_min_confidence": study.suggestion_min_confidence,
        "suggest_on_import": study.suggest_on_import,
    }


@require_http_methods(["GET", "POST"])
@study_view("owner")
def coding_settings(request: HttpRequest, study: Study) -> HttpResponse:
    form = CodingSettingsForm(request.POST or None, initial=_initial(study))
    if request.method == "POST" and form.is_valid():
        try:
            study_coding_settings_update(study=study, **form.cleaned_data)
        except ValidationError as exc:
            for name, errors in exc.message_dict.items():
                form.add_error(name if name in form.fields else None, errors)
        else:
            messages.success(request, "Coding settings saved.")
            return redirect("study_coding_settings", slug=study.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotate/coding_settings.html", {"study": study, "form": form}, status=status)
