"""Forms of the coding workspace: codes come in as codebook codes ("TUS-03", "llm") and leave as objects."""

from __future__ import annotations

from django import forms

from annotate.coding.adjudication import AdjudicationValues
from annotate.coding.evidence import MAX_QUOTE, evidence_locate
from annotate.coding.selectors import Picker
from annotate.coding.services import CodingValues, coding_values_validate
from annotate.models import Confidence, Episode, QueueOrder, Split, Suggestion
from annotate.studies.coding_settings import MAX_CODERS_PER_EPISODE
from taxonomy.models import Axis

AXES = tuple(Axis.values)  # source, stage, capability


class _CodesForm(forms.Form):
    """Failure type and axis values by code, looked up in the study's codebook without queries."""

    failure_type = forms.CharField(required=False, max_length=20)
    source = forms.CharField(required=False, max_length=50)
    stage = forms.CharField(required=False, max_length=50)
    capability = forms.CharField(required=False, max_length=50)
    not_a_failure = forms.BooleanField(required=False)
    needs_new_type = forms.BooleanField(required=False)
    # Who and when, for trace episodes (the service refuses them on documents without steps).
    decisive_step = forms.IntegerField(required=False, min_value=0)
    responsible_agent = forms.CharField(required=False, max_length=200)

    def __init__(self, *args, picker: Picker, **kwargs):
        super().__init__(*args, **kwargs)
        self.picker = picker

    def clean_failure_type(self):
        code = self.cleaned_data["failure_type"].strip()
        if not code:
            return None
        found = self.picker.type_by_code.get(code)
        if found is None:
            raise forms.ValidationError(f"'{code}' is not a failure type of this study's codebook.")
        return found

    def _clean_axis(self, axis: str):
        code = self.cleaned_data[axis].strip()
        if not code:
            return None
        found = self.picker.value_by_code[axis].get(code)
        if found is None:
            raise forms.ValidationError(f"'{code}' is not a {Axis(axis).label.lower()} of this study's codebook.")
        return found

    def validate_codes(self, data: dict, *, reason: str) -> None:
        """Add the service's field errors to the form's, so one round trip shows them all."""
        names = ("failure_type", "source", "stage", "capability")
        values = CodingValues(
            **{name: data.get(name) for name in names if name not in self.errors},
            not_a_failure=data.get("not_a_failure", False),
            not_a_failure_reason=data.get(reason) or "",
            needs_new_type=data.get("needs_new_type", False),
        )
        try:
            coding_values_validate(values=values, codebook_id=self.picker.codebook_id)
        except forms.ValidationError as exc:
            for name, messages in exc.message_dict.items():
                target = reason if name == "not_a_failure_reason" else name
                if target in self.fields and target not in self.errors:
                    self.add_error(target, messages)

    def clean_source(self):
        return self._clean_axis("source")

    def clean_stage(self):
        return self._clean_axis("stage")

    def clean_capability(self):
        return self._clean_axis("capability")


class CodingForm(_CodesForm):
    not_a_failure_reason = forms.CharField(required=False, max_length=5000)
    confidence = forms.ChoiceField(choices=Confidence.choices, initial=Confidence.MEDIUM)
    memo = forms.CharField(required=False, max_length=20000)
    evidence = forms.CharField(required=False, max_length=MAX_QUOTE, strip=False)
    # Where the selection started, in ten-thousandths of the rendered text's length:
    # rendered and source offsets differ, but relative positions agree well enough
    # to pick the right one of several identical phrases.
    evidence_hint = forms.IntegerField(required=False, min_value=0, max_value=10000)
    version = forms.IntegerField(required=False, min_value=0)
    from_suggestion = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args, episode: Episode, text: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.episode = episode
        self.text = text

    def clean_from_suggestion(self):
        pk = self.cleaned_data["from_suggestion"]
        if pk is None:
            return None
        suggestion = Suggestion.objects.filter(pk=pk, episode=self.episode).first()
        if suggestion is None:
            raise forms.ValidationError("This suggestion does not belong to this episode.")
        return suggestion

    def clean(self):
        data = super().clean()
        quote = (data.get("evidence") or "").strip()
        data["evidence_start"] = data["evidence_end"] = None
        if quote:
            hint = data.get("evidence_hint")
            near = hint * len(self.text) // 10000 if hint is not None else None
            located = evidence_locate(self.text, quote, near)
            if located is None:
                self.add_error("evidence", "The evidence must be a passage of the episode text.")
            else:
                data["evidence"], data["evidence_start"], data["evidence_end"] = (
                    located.quote,
                    located.start,
                    located.end,
                )
        else:
            data["evidence"] = ""
        self.validate_codes(data, reason="not_a_failure_reason")
        return data

    def values(self) -> CodingValues:
        d = self.cleaned_data
        return CodingValues(
            failure_type=d["failure_type"],
            source=d["source"],
            stage=d["stage"],
            capability=d["capability"],
            not_a_failure=d["not_a_failure"],
            not_a_failure_reason=d["not_a_failure_reason"].strip(),
            needs_new_type=d["needs_new_type"],
            confidence=d["confidence"],
            memo=d["memo"].strip(),
            evidence=d["evidence"],
            evidence_start=d["evidence_start"],
            evidence_end=d["evidence_end"],
            decisive_step=d["decisive_step"],
            responsible_agent=d["responsible_agent"].strip(),
        )


class AdjudicationForm(_CodesForm):
    rationale = forms.CharField(
        max_length=20000, error_messages={"required": "Give the rationale for the final codes."}
    )

    def clean(self):
        data = super().clean()
        self.validate_codes(data, reason="rationale")
        return data

    def values(self) -> AdjudicationValues:
        d = self.cleaned_data
        return AdjudicationValues(
            failure_type=d["failure_type"],
            source=d["source"],
            stage=d["stage"],
            capability=d["capability"],
            not_a_failure=d["not_a_failure"],
            needs_new_type=d["needs_new_type"],
            rationale=d["rationale"].strip(),
            decisive_step=d["decisive_step"],
            responsible_agent=d["responsible_agent"].strip(),
        )


class CodingSettingsForm(forms.Form):
    coders_per_episode = forms.IntegerField(
        min_value=1, max_value=MAX_CODERS_PER_EPISODE, label="Coders per episode (overlap k)"
    )
    blind = forms.BooleanField(required=False, label="Blind coding")
    queue_order = forms.ChoiceField(choices=QueueOrder.choices, widget=forms.RadioSelect, label="Queue order")
    queue_splits = forms.MultipleChoiceField(
        choices=Split.choices, widget=forms.CheckboxSelectMultiple, label="Splits in the queue"
    )
    suggestions_after_first_choice = forms.BooleanField(
        required=False, label="Show suggestions only after the coder's first choice"
    )
    suggest_on_import = forms.BooleanField(required=False, label="Suggest codes for imported documents")
    exposure_experiment = forms.BooleanField(
        required=False, label="Randomise when each coder sees suggestions (exposure experiment)"
    )
    # Left empty, the threshold stays as it is.
    suggestion_min_confidence = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Confidence below which a suggestion counts as not confident",
    )
