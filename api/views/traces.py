"""Agent traces: import them (a file as a job, or JSON with artifacts linked to steps) and read their steps."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.models import Document, Episode
from annotate.traces.parsed import TraceArtifact
from annotate.traces.parsers import FORMATS
from annotate.traces.selectors import trace_window
from annotate.traces.services import trace_import_value, trace_upload_start
from api.parsers import BoundedJSONParser, SafeJSONField
from api.permissions import StudyMember
from api.serializers.core import JobSerializer
from api.serializers.incidents import ArtifactInSerializer
from api.views.jobs import _as_drf_error


class TraceImportSerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=FORMATS, help_text="otlp, openinference, langfuse, phoenix, whowhen or mast."
    )
    file = serializers.FileField(required=False, help_text="A trace file (multipart): imported by a job.")
    data = SafeJSONField(required=False, help_text="The trace(s) as JSON, imported at once.")
    artifacts = ArtifactInSerializer(
        many=True, required=False, help_text="Artifacts of the one trace in data, each linked by span_id or step."
    )

    def validate(self, attrs):
        if ("file" in attrs) == ("data" in attrs):
            raise serializers.ValidationError("Send either a file or data.")
        if attrs.get("artifacts") and "file" in attrs:
            raise serializers.ValidationError({"artifacts": "Artifacts come with data, not with a file."})
        return attrs


class StepSerializer(serializers.Serializer):
    index = serializers.IntegerField(source="step.index", help_text="0-based position in the trace.")
    parent = serializers.IntegerField(source="step.parent_index", allow_null=True, help_text="The parent step.")
    span_id = serializers.CharField(source="step.span_id", help_text="The span id, if the trace had spans.")
    agent = serializers.CharField(source="step.agent", help_text="The agent (role or name).")
    kind = serializers.CharField(source="step.kind", help_text="message, llm_call, tool_call, tool_result, ...")
    name = serializers.CharField(source="step.name", help_text="Operation or tool name.")
    input = serializers.CharField(source="input_head", help_text="Input (first 1,500 characters).")
    output = serializers.CharField(source="output_head", help_text="Output (first 1,500 characters).")
    input_chars = serializers.IntegerField(source="input_len", help_text="Length of the whole input.")
    output_chars = serializers.IntegerField(source="output_len", help_text="Length of the whole output.")
    started_at = serializers.DateTimeField(source="step.started_at", allow_null=True, help_text="Start.")
    ended_at = serializers.DateTimeField(source="step.ended_at", allow_null=True, help_text="End.")
    status = serializers.CharField(source="step.status", help_text="ok, error or empty.")
    error = serializers.CharField(source="step.error", help_text="Error text.")
    paired = serializers.IntegerField(source="step.paired_index", allow_null=True, help_text="Paired call/result.")
    evidence = serializers.CharField(help_text="Tool calls: requested, ran or effect.")
    detail = serializers.JSONField(
        source="step.detail",
        help_text="What the span said beyond the columns: model, input_tokens, output_tokens, total_tokens, cost, "
        "finish_reason, http_status, status_message, and its other attributes (cut at 4 KB; attributes_omitted "
        "counts what was left out). Empty for log formats.",
    )
    artifacts = serializers.SerializerMethodField(help_text="Artifacts linked to this step.")

    def get_artifacts(self, row) -> list[dict]:
        return [{"id": a.pk, "kind": a.kind, "name": a.name, "url": a.url} for a in row.artifacts]


class TraceImport(APIView):
    permission_classes = [StudyMember]
    required_level = "owner"  # as the other imports
    parser_classes = [BoundedJSONParser, MultiPartParser, FormParser]

    @extend_schema(
        summary="Import traces",
        description=(
            "A trace file (multipart `file` + `format`) is imported by a job: 202 with the job. JSON "
            "(`format`, `data`, optional `artifacts` with `span_id` or `step`) is imported at once: 201 with the "
            "documents and episodes. Upserts on the trace's id; a bad trace is a 400 naming the record."
        ),
        request=TraceImportSerializer,
        responses={201: OpenApiResponse(description="Imported."), 202: JobSerializer, 400: OpenApiResponse()},
    )
    def post(self, request: Request, slug: str) -> Response:
        payload = TraceImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        v = payload.validated_data
        try:
            if "file" in v:
                job = trace_upload_start(
                    study=request.study, user=request.user, uploaded_file=v["file"], fmt=v["format"]
                )
                return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
            artifacts = [TraceArtifact(**a) for a in v.get("artifacts", [])]
            result, documents = trace_import_value(
                study=request.study, data=v["data"], fmt=v["format"], artifacts=artifacts
            )
        except DjangoValidationError as exc:
            raise _as_drf_error(exc) from exc
        episodes = dict(Episode.objects.filter(document__in=documents, order=0).values_list("document_id", "pk"))
        traces = [{"document": d.pk, "external_id": d.external_id, "episode": episodes.get(d.pk)} for d in documents]
        return Response({**result.as_dict(), "traces": traces}, status=status.HTTP_201_CREATED)


class TraceSteps(APIView):
    permission_classes = [StudyMember]

    @extend_schema(
        summary="A trace's steps",
        description=(
            "Steps of a trace or incident document, a window at a time (`start`, `limit` up to 500, `q`); "
            "`agent` keeps one agent's steps, `errors=1` only failed steps."
        ),
        parameters=[
            OpenApiParameter("start", int),
            OpenApiParameter("limit", int),
            OpenApiParameter("q", str),
            OpenApiParameter("agent", str),
            OpenApiParameter("errors", str, enum=["0", "1"]),
        ],
        responses={200: StepSerializer(many=True)},
    )
    def get(self, request: Request, slug: str, pk: int) -> Response:
        document = get_object_or_404(Document.objects.only("pk", "study_id", "meta"), pk=pk, study=request.study)
        start = request.query_params.get("start", "0")
        limit = request.query_params.get("limit", "100")
        if not start.isdigit() or not limit.isdigit():
            raise serializers.ValidationError({"start": "start and limit are whole numbers."})
        errors = request.query_params.get("errors", "0")
        if errors not in ("0", "1"):
            raise serializers.ValidationError({"errors": "errors is 0 or 1."})
        window = trace_window(
            document,
            start=int(start),
            limit=int(limit),
            query=request.query_params.get("q", ""),
            agent=request.query_params.get("agent", ""),
            errors_only=errors == "1",
        )
        return Response(
            {
                "total": window.total,
                "next_start": window.next_start,
                "steps": StepSerializer(window.rows, many=True).data,
            }
        )
