"""Serializers for incident intake, incidents and their triage."""

from __future__ import annotations

from rest_framework import serializers

from annotate.incidents import services as svc
from annotate.models import Artifact, Document, TriageEvent, TriageStatus
from annotate.traces.parsed import TraceArtifact
from api.parsers import SafeJSONField


class ArtifactInSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=Artifact.Kind.choices, help_text="diff, test_result, log, db_change, screenshot or trace."
    )
    name = serializers.CharField(max_length=300, help_text="A name, e.g. the file or test.")
    content = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=svc.MAX_ARTIFACT_CHARS,
        help_text="The artifact itself (a diff, log, ...). Give content or url.",
    )  # fmt: skip
    url = serializers.URLField(
        required=False, allow_blank=True, max_length=1000, help_text="Where the artifact lives (http or https)."
    )
    span_id = serializers.CharField(
        required=False, allow_blank=True, max_length=100,
        help_text="The span of the trace that produced it (links it to that step: the tool call's effect).",
    )  # fmt: skip
    step = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="Or the index of the trace step that produced it."
    )

    def validate(self, attrs):
        if bool(attrs.get("content")) == bool(attrs.get("url")):
            raise serializers.ValidationError("Give either content or a url.")
        if attrs.get("span_id") and attrs.get("step") is not None:
            raise serializers.ValidationError("Give span_id or step, not both.")
        return attrs


class IncidentInSerializer(serializers.Serializer):
    study = serializers.SlugField(
        help_text=(
            "The study's slug; you must be a coder or owner there, and the study must accept incidents "
            "(an incident study: research studies refuse them with a 400 on this field)."
        )
    )
    service = serializers.CharField(max_length=300, help_text="The service or agent; it becomes the cluster.")
    title = serializers.CharField(max_length=1000, help_text="A one-line summary.")
    description = serializers.CharField(
        max_length=svc.MAX_DESCRIPTION, trim_whitespace=False, help_text="What happened (Markdown)."
    )
    occurred_at = serializers.DateTimeField(required=False, allow_null=True, help_text="When it happened.")
    severity = serializers.ChoiceField(
        choices=[(s, s) for s in svc.SEVERITIES], required=False, allow_blank=True, help_text="Severity."
    )
    trace = SafeJSONField(
        required=False, allow_null=True, help_text="Optional trace as JSON, e.g. OpenTelemetry GenAI spans."
    )
    artifacts = ArtifactInSerializer(
        many=True, required=False, max_length=svc.MAX_ARTIFACTS, help_text="What actually changed."
    )
    external_id = serializers.CharField(
        required=False, allow_blank=True, max_length=200,
        help_text="Your id for the incident; sending it again returns the stored incident instead of a duplicate.",
    )  # fmt: skip

    def to_data(self) -> svc.IncidentData:
        v = self.validated_data
        return svc.IncidentData(
            service=v["service"], title=v["title"], description=v["description"], occurred_at=v.get("occurred_at"),
            severity=v.get("severity", ""), trace=v.get("trace"), external_id=v.get("external_id", ""),
            artifacts=tuple(TraceArtifact(**a) for a in v.get("artifacts", [])),
        )  # fmt: skip


class ArtifactSerializer(serializers.ModelSerializer):
    step = serializers.IntegerField(source="step.index", default=None, read_only=True, help_text="Its step's index.")
    span_id = serializers.CharField(source="step.span_id", default="", read_only=True, help_text="Its step's span.")

    class Meta:
        model = Artifact
        fields = ["id", "kind", "name", "content", "url", "step", "span_id", "created_at"]
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "kind": {"help_text": "diff, test_result, log, db_change, screenshot or trace."},
            "name": {"help_text": "Its name."},
            "content": {"help_text": "The artifact as sent (untrusted text)."},
            "url": {"help_text": "Its link, if sent as a link."},
            "created_at": {"help_text": "When it was stored."},
        }


class TriageEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor.username", default=None, allow_null=True, read_only=True, help_text="Who moved it."
    )
    assignee = serializers.CharField(
        source="assignee.username",
        default=None,
        allow_null=True,
        read_only=True,
        help_text="The assignee after the move.",
    )

    class Meta:
        model = TriageEvent
        fields = ["from_status", "to_status", "actor", "assignee", "note", "created_at"]
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "from_status": {"help_text": "Status before (empty when reported)."},
            "to_status": {"help_text": "Status after."},
            "note": {"help_text": "The note given with the move."},
            "created_at": {"help_text": "When."},
        }


class IncidentSerializer(serializers.ModelSerializer):
    study = serializers.CharField(source="study.slug", read_only=True, help_text="The study's slug.")
    service = serializers.CharField(source="cluster", read_only=True, help_text="The service or agent.")
    description = serializers.CharField(source="body", read_only=True, help_text="What happened (untrusted).")
    assignee = serializers.CharField(
        source="assignee.username", default=None, allow_null=True, read_only=True, help_text="Who handles it."
    )
    episode = serializers.SerializerMethodField(help_text="The incident's episode id (to code it).")
    trace = serializers.SerializerMethodField(help_text="The trace sent with it, if any.")
    artifacts = ArtifactSerializer(many=True, read_only=True, help_text="Artifacts sent with it.")
    history = TriageEventSerializer(
        source="triage_events", many=True, read_only=True, help_text="Who moved it, when, from what to what."
    )

    class Meta:
        model = Document
        fields = [
            "id", "study", "external_id", "service", "title", "description", "severity", "occurred_at",
            "triage_status", "assignee", "imported_at", "episode", "trace", "artifacts", "history",
        ]  # fmt: skip
        read_only_fields = fields
        extra_kwargs = {
            "id": {"help_text": "Identifier."},
            "external_id": {"help_text": "The incident's id (yours, or one Faultline made)."},
            "title": {"help_text": "Summary (untrusted)."},
            "severity": {"help_text": "Severity."},
            "occurred_at": {"help_text": "When it happened."},
            "triage_status": {"help_text": "new, triaged or resolved."},
            "imported_at": {"help_text": "When it was received."},
        }

    def get_episode(self, document: Document) -> int | None:
        episodes = list(document.episodes.all())
        return episodes[0].pk if episodes else None

    def get_trace(self, document: Document) -> dict | list | None:
        return document.raw.get("trace") if isinstance(document.raw, dict) else None


class IncidentCreatedSerializer(IncidentSerializer):
    suggestion_job = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="The job making its suggestion (poll jobs/{id}/)."
    )
    created = serializers.BooleanField(
        read_only=True, help_text="False when an incident with this external_id already existed."
    )

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "suggestion_job", "created"]
        read_only_fields = fields


class TriageMoveSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=TriageStatus.choices, help_text="new, triaged or resolved.")
    assignee = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=150,
        help_text="Username of a coder or owner of the study (required to triage, unless already assigned).",
    )  # fmt: skip
    note = serializers.CharField(required=False, allow_blank=True, max_length=svc.MAX_NOTE, help_text="A note.")
