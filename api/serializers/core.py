"""Serializers for codebooks, studies, documents, episodes, codings and jobs.

Fields are listed explicitly, so a new model field never leaks into the API.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotate.coding.selectors import codebook_picker
from annotate.models import Coding, Confidence, Document, Episode, Job, Study, Suggestion
from lib.db.prepared import MAX_ID, Prepared
from taxonomy.models import Axis, AxisValue, Codebook, FailureType


class AxisValueSerializer(serializers.ModelSerializer):
    class Meta:
        model = AxisValue
        fields = ["code", "name", "definition"]
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "code": {"help_text": "The axis code used in codings and filters."},
            "name": {"help_text": "Human-readable name."},
            "definition": {"help_text": "What the value means, from the codebook."},
        }


class CodebookSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True, help_text="name@version, as used in exports.")

    class Meta:
        model = Codebook
        fields = ["id", "name", "version", "label", "description", "published_at", "created_at"]
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "name": {"help_text": "Codebook name."},
            "version": {"help_text": "Codebook version; a published version is immutable."},
            "description": {"help_text": "What the codebook is for."},
            "published_at": {"help_text": "When the version was published (null for a draft)."},
            "created_at": {"help_text": "When the version was created."},
        }


class AxesSerializer(serializers.Serializer):
    source = AxisValueSerializer(many=True, help_text="Responsibility sources.")
    stage = AxisValueSerializer(many=True, help_text="Workflow stages.")
    capability = AxisValueSerializer(many=True, help_text="Agent capabilities.")


class CodebookDetailSerializer(CodebookSerializer):
    axes = serializers.SerializerMethodField(help_text="The codebook's axis values by axis, in codebook order.")

    class Meta(CodebookSerializer.Meta):
        fields = [*CodebookSerializer.Meta.fields, "axes"]

    @extend_schema_field(AxesSerializer)
    def get_axes(self, codebook: Codebook) -> dict:
        grouped: dict[str, list] = {axis: [] for axis in Axis.values}
        for value in codebook.axis_values.order_by("axis", "order"):
            grouped[value.axis].append(AxisValueSerializer(value).data)
        return grouped


class FailureTypeSerializer(serializers.ModelSerializer):
    category = serializers.CharField(source="category.code", read_only=True, help_text="Category code.")
    category_name = serializers.CharField(source="category.name", read_only=True, help_text="Category name.")

    class Meta:
        model = FailureType
        fields = [
            "id", "code", "name", "category", "category_name", "definition", "indicators", "example",
            "typical_source", "typical_stages", "typical_capabilities",
        ]  # fmt: skip
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "code": {"help_text": "Type code, unique in its codebook (e.g. TUS-03)."},
            "name": {"help_text": "Type name."},
            "definition": {"help_text": "When to use this type."},
            "indicators": {"help_text": "Observable signs of this type."},
            "example": {"help_text": "A worked example."},
            "typical_source": {"help_text": "The usual responsibility source (a source code)."},
            "typical_stages": {"help_text": "Usual workflow stages (stage codes)."},
            "typical_capabilities": {"help_text": "Usual agent capabilities (capability codes)."},
        }


class StudySerializer(serializers.ModelSerializer):
    codebook = serializers.CharField(source="codebook.label", read_only=True, help_text="The codebook, name@version.")
    codebook_id = serializers.IntegerField(read_only=True, help_text="The codebook's id.")
    role = serializers.CharField(source="my_role", read_only=True, help_text="Your role: owner, coder or viewer.")

    class Meta:
        model = Study
        fields = [
            "slug", "name", "description", "codebook", "codebook_id", "role", "coders_per_episode", "blind",
            "label_rule", "accepts_incidents", "created_at",
        ]  # fmt: skip
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "slug": {"help_text": "The study's identifier in URLs."},
            "name": {"help_text": "Study name."},
            "description": {"help_text": "What the study is about."},
            "coders_per_episode": {"help_text": "How many coders code each episode (k)."},
            "blind": {"help_text": "Whether coders see each other's codings while coding."},
            "label_rule": {"help_text": "Which label analysis uses: consensus or one coder's."},
            "created_at": {"help_text": "When the study was created."},
            "accepts_incidents": {
                "read_only": True,
                "help_text": "Whether POST /api/v1/incidents/ may send incidents here (an incident study).",
            },
        }


class DocumentSerializer(serializers.ModelSerializer):
    labels = serializers.SerializerMethodField(help_text="Labels (GitHub labels or incident tags).")
    assignee = serializers.CharField(
        source="assignee.username",
        read_only=True,
        default=None,
        allow_null=True,
        help_text="Incident assignee (username).",
    )

    class Meta:
        model = Document
        fields = [
            "id", "kind", "external_id", "url", "cluster", "title", "body", "meta", "labels", "imported_at",
            "updated_at", "triage_status", "severity", "occurred_at", "assignee",
        ]  # fmt: skip
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "kind": {"help_text": "github_issue, literature or incident."},
            "external_id": {"help_text": "The id in its source (owner/name#number, citation key, incident id)."},
            "url": {"help_text": "Where the document lives, if anywhere."},
            "cluster": {"help_text": "The resampling unit: repository, citation key/DOI, or service."},
            "title": {"help_text": "Title."},
            "body": {"help_text": "Full text (Markdown as imported; render it sanitised)."},
            "meta": {"help_text": "Source metadata (state, venue, year, ...)."},
            "imported_at": {"help_text": "When the document was first imported."},
            "updated_at": {"help_text": "When the document last changed."},
            "triage_status": {"help_text": "Incidents only: new, triaged or resolved."},
            "severity": {"help_text": "Incidents only: severity."},
            "occurred_at": {"help_text": "Incidents only: when it happened."},
        }

    def get_labels(self, document: Document) -> list[str]:
        return [label for label in document.labels.split(",") if label]


class EpisodeSerializer(serializers.ModelSerializer):
    document_kind = serializers.CharField(source="document.kind", read_only=True, help_text="The document's kind.")
    external_id = serializers.CharField(
        source="document.external_id", read_only=True, help_text="The document's external id."
    )
    cluster = serializers.CharField(source="document.cluster", read_only=True, help_text="The document's cluster.")
    title = serializers.CharField(source="document.title", read_only=True, help_text="The document's title.")

    class Meta:
        model = Episode
        fields = [
            "id", "document", "document_kind", "external_id", "cluster", "title", "excerpt", "start", "end",
            "order", "split", "status", "n_codings", "created_at",
        ]  # fmt: skip
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "document": {"help_text": "The document's id."},
            "excerpt": {"help_text": "The episode's text; empty means the whole document body."},
            "start": {"help_text": "Start offset of the excerpt in the body, if it was cut from it."},
            "end": {"help_text": "End offset of the excerpt in the body."},
            "order": {"help_text": "Position among the document's episodes."},
            "split": {"help_text": "primary or holdout."},
            "status": {
                "help_text": "open (fewer than k codings), coded, or adjudicated (left out where blinding hides "
                "others' progress)."
            },
            "n_codings": {"help_text": "How many coders coded it (left out where blinding hides others' progress)."},
            "created_at": {"help_text": "When the episode was created."},
        }

    # Fields that tell that, and when, others coded: left out for members who code blind.
    PROGRESS_FIELDS = ("status", "n_codings")

    def get_fields(self):
        fields = super().get_fields()
        request = self.context.get("request")
        visibility = getattr(request, "visibility", None)
        if visibility is None or not visibility.sees_progress:
            for name in self.PROGRESS_FIELDS:
                fields.pop(name, None)
        return fields


class CodingSerializer(serializers.ModelSerializer):
    coder = serializers.IntegerField(source="coder_id", read_only=True, help_text="The coder's user id.")
    coder_username = serializers.CharField(source="coder.username", read_only=True, help_text="The coder's username.")
    failure_type = serializers.CharField(
        source="failure_type.code", read_only=True, default=None, allow_null=True, help_text="Failure type code."
    )
    source = serializers.CharField(
        source="source.code", read_only=True, default=None, allow_null=True, help_text="Source code."
    )
    stage = serializers.CharField(
        source="stage.code", read_only=True, default=None, allow_null=True, help_text="Stage code."
    )
    capability = serializers.CharField(
        source="capability.code", read_only=True, default=None, allow_null=True, help_text="Capability code."
    )

    class Meta:
        model = Coding
        fields = [
            "id", "episode", "coder", "coder_username", "failure_type", "source", "stage", "capability",
            "not_a_failure", "not_a_failure_reason", "needs_new_type", "confidence", "memo", "evidence",
            "evidence_start", "evidence_end", "decisive_step", "responsible_agent", "from_suggestion", "version",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "episode": {"help_text": "The episode's id."},
            "not_a_failure": {"help_text": "The episode is not a failure."},
            "not_a_failure_reason": {"help_text": "Why it is not a failure."},
            "needs_new_type": {"help_text": "A failure no existing type fits."},
            "confidence": {"help_text": "The coder's confidence: low, medium or high."},
            "memo": {"help_text": "The coder's memo."},
            "evidence": {"help_text": "Quoted evidence from the episode."},
            "evidence_start": {"help_text": "Start offset of the evidence in the episode text."},
            "evidence_end": {"help_text": "End offset of the evidence in the episode text."},
            "from_suggestion": {"help_text": "The suggestion this coding was built from, if any."},
            "decisive_step": {"help_text": "Trace episodes: the index of the step that decided the failure."},
            "responsible_agent": {"help_text": "Trace episodes: the agent responsible for the failure."},
            "version": {"help_text": "Optimistic-locking version: send it back when you update."},
            "created_at": {"help_text": "When the coding was created."},
            "updated_at": {"help_text": "When it last changed."},
        }

    def to_representation(self, instance: Coding) -> dict:
        """The fields above, read straight off the coding. DRF's walk builds every field of the model anew for
        each serializer (about half a millisecond, more than a query, on each save through the API); this gives
        the same output, which api/tests/test_codings.py checks against DRF's own for every field."""
        when = _DATETIME.to_representation
        return {
            "id": instance.pk,
            "episode": instance.episode_id,
            "coder": instance.coder_id,
            "coder_username": instance.coder.username,
            "failure_type": instance.failure_type.code if instance.failure_type_id is not None else None,
            "source": instance.source.code if instance.source_id is not None else None,
            "stage": instance.stage.code if instance.stage_id is not None else None,
            "capability": instance.capability.code if instance.capability_id is not None else None,
            "not_a_failure": bool(instance.not_a_failure),
            "not_a_failure_reason": str(instance.not_a_failure_reason),
            "needs_new_type": bool(instance.needs_new_type),
            "confidence": str(instance.confidence),
            "memo": str(instance.memo),
            "evidence": str(instance.evidence),
            "evidence_start": instance.evidence_start,
            "evidence_end": instance.evidence_end,
            "decisive_step": instance.decisive_step,
            "responsible_agent": str(instance.responsible_agent),
            "from_suggestion": instance.from_suggestion_id,
            "version": instance.version,
            "created_at": when(instance.created_at) if instance.created_at is not None else None,
            "updated_at": when(instance.updated_at) if instance.updated_at is not None else None,
        }


_DATETIME = serializers.DateTimeField()


@extend_schema_field(OpenApiTypes.STR)
class _StudyScoped(serializers.SlugRelatedField):
    """A code resolved within the request's study: another study's or codebook's rows do not exist."""

    def __init__(self, *, build, **kwargs):
        self.build = build
        super().__init__(**kwargs)

    def get_queryset(self):
        return self.build(self.context["study"])


@extend_schema_field(OpenApiTypes.INT)
class _StudyScopedId(_StudyScoped):
    """An id resolved within the request's study."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="pk", **kwargs)

    def _id(self, data) -> int:
        if isinstance(data, bool) or not str(data).isdigit():
            self.fail("invalid")
        return int(data)

    def to_internal_value(self, data):
        return super().to_internal_value(self._id(data))


class _CodebookCode(_StudyScoped):
    """A failure type (axis None) or axis value code of the study's codebook, found in its picker
    (cached per published codebook version) instead of by a query per field."""

    def __init__(self, *, axis: str | None = None, **kwargs):
        self.axis = axis
        if axis is None:
            build = lambda study: FailureType.objects.filter(codebook_id=study.codebook_id)  # noqa: E731
        else:
            build = lambda study: AxisValue.objects.filter(codebook_id=study.codebook_id, axis=axis)  # noqa: E731
        super().__init__(slug_field="code", build=build, **kwargs)

    def to_internal_value(self, data):
        picker = codebook_picker(self.context["study"].codebook)
        found = (picker.type_by_code if self.axis is None else picker.value_by_code[self.axis]).get(str(data))
        if found is None:
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data))
        return found


@extend_schema_field(OpenApiTypes.INT)
class _StudyEpisode(_StudyScopedId):
    """An episode of the request's study, read with whether the requesting user has coded it (`has_mine`)."""

    def __init__(self, **kwargs):
        super().__init__(build=lambda study: Episode.objects.filter(study=study), **kwargs)

    def get_queryset(self):
        episodes = super().get_queryset()
        request = self.context.get("request")
        if request is None or not request.user.is_authenticated:
            return episodes
        return _with_mine(episodes, request.user.pk)

    def to_internal_value(self, data):
        request = self.context.get("request")
        if request is None or not request.user.is_authenticated:
            episode = super().to_internal_value(data)
        else:  # every coding save asks this: the same query as get_queryset's, compiled once
            pk = self._id(data)
            study = self.context["study"]
            found = pk <= MAX_ID and _EPISODE_WITH_MINE.first(study_id=study.pk, pk=pk, coder_id=request.user.pk)
            if not found:
                self.fail("does_not_exist", slug_name=self.slug_field, value=str(pk))
            episode = found
        episode.study = self.context["study"]
        return episode


def _with_mine(episodes: QuerySet[Episode], coder_id: int) -> QuerySet[Episode]:
    """The episodes with `has_mine`: whether that coder has coded each."""
    return episodes.annotate(has_mine=Exists(Coding.objects.filter(episode=OuterRef("pk"), coder_id=coder_id)))


_EPISODE_WITH_MINE = Prepared(
    lambda study_id, pk, coder_id: _with_mine(Episode.objects.filter(study_id=study_id, pk=pk), coder_id).order_by()[
        :1
    ],
    study_id=int,
    pk=int,
    coder_id=int,
)


class CodingWriteSerializer(serializers.Serializer):
    """Your coding of an episode: created, or updated when you send the version you last saw."""

    episode = _StudyEpisode(help_text="The episode's id (in this study).")
    failure_type = _CodebookCode(
        required=False, allow_null=True, help_text="Failure type code from the study's codebook."
    )
    source = _CodebookCode(axis=Axis.SOURCE, required=False, allow_null=True, help_text="Responsibility source code.")
    stage = _CodebookCode(axis=Axis.STAGE, required=False, allow_null=True, help_text="Workflow stage code.")
    capability = _CodebookCode(
        axis=Axis.CAPABILITY, required=False, allow_null=True, help_text="Agent capability code."
    )
    not_a_failure = serializers.BooleanField(default=False, help_text="The episode is not a failure.")
    not_a_failure_reason = serializers.CharField(
        default="", allow_blank=True, max_length=5000, help_text="Why it is not a failure (required if it is not)."
    )
    needs_new_type = serializers.BooleanField(default=False, help_text="A failure that no existing type fits.")
    confidence = serializers.ChoiceField(
        choices=Confidence.choices, default=Confidence.MEDIUM, help_text="low, medium or high."
    )
    memo = serializers.CharField(default="", allow_blank=True, max_length=20000, help_text="A memo.")
    evidence = serializers.CharField(
        default="", allow_blank=True, max_length=20000, help_text="Quoted evidence from the episode."
    )
    evidence_start = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=2**31 - 1,
        help_text="Start offset of the evidence in the episode text (located from the quote if left out).",
    )  # fmt: skip
    evidence_end = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=2**31 - 1,
        help_text="End offset of the evidence in the episode text.",
    )  # fmt: skip
    decisive_step = serializers.IntegerField(
        required=False, allow_null=True, min_value=0,
        help_text="Trace episodes only: the index of the step that decided the failure.",
    )  # fmt: skip
    responsible_agent = serializers.CharField(
        default="", allow_blank=True, max_length=200, help_text="Trace episodes only: the agent responsible."
    )
    version = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="The version of your coding you are updating (omit or 0 to create). A stale version is a 409.",
    )
    from_suggestion = _StudyScopedId(
        build=lambda study: Suggestion.objects.filter(episode__study=study),
        required=False,
        allow_null=True,
        help_text="The suggestion this coding accepts or edits (its id).",
    )


class ConflictSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What happened.")
    current = CodingSerializer(allow_null=True, help_text="The coding as it is now (null if it was deleted).")


class JobSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="The study's slug, if the job belongs to one."
    )
    percent = serializers.IntegerField(read_only=True, help_text="Progress, 0-100.")
    finished = serializers.BooleanField(read_only=True, help_text="Whether the job has ended (success or failure).")

    class Meta:
        model = Job
        fields = [
            "id", "kind", "status", "study", "done", "total", "percent", "finished", "params", "result", "error",
            "created_at", "started_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "kind": {"help_text": "What the job does (import, suggest, bootstrap, export_parquet, ...)."},
            "status": {"help_text": "pending, running, success or failed."},
            "done": {"help_text": "Units of work done."},
            "total": {"help_text": "Units of work in all (0 until known)."},
            "params": {"help_text": "The parameters the job was started with."},
            "result": {"help_text": "The handler's result once it succeeded."},
            "error": {"help_text": "Why it failed."},
            "created_at": {"help_text": "When it was started."},
            "started_at": {"help_text": "When a worker picked it up."},
            "finished_at": {"help_text": "When it ended."},
        }
