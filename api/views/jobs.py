"""Jobs: their status, and the endpoints that start long work (imports, suggestions, analysis)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.jobs.runner import job_start
from annotate.models import SuggestionBackend
from api import selectors
from api.permissions import StudyMember
from api.serializers.core import JobSerializer
from lib.stats.bootstrap import CELL_METHOD_ALIASES, CELL_METHODS, DEFAULT_CELL_METHOD


@extend_schema(
    summary="A job",
    description="A job's status and progress; poll it until `finished`. Jobs of other studies are 404.",
)
class JobDetail(generics.RetrieveAPIView):
    serializer_class = JobSerializer
    filter_backends: list = []

    def get_queryset(self):
        return selectors.jobs_visible(self.request.user)


def _job_response(job) -> Response:
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


def _as_drf_error(exc: DjangoValidationError) -> serializers.ValidationError:
    return serializers.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})


class ImportRequestSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="A GitHub issues JSON array (.json), or literature as .bib, .ris or .csv; chosen by extension."
    )

    def validate_file(self, value):
        limit = settings.FAULTLINE_MAX_UPLOAD_MB * 1024 * 1024
        if value.size > limit:
            raise serializers.ValidationError(f"The file is larger than {settings.FAULTLINE_MAX_UPLOAD_MB} MB.")
        return value


class ImportStart(APIView):
    permission_classes = [StudyMember]
    required_level = "owner"  # as on the study page: owners import
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        summary="Import a file",
        description="Upload a file to import into the study (owners). The import runs as a job; poll jobs/{id}/.",
        request={"multipart/form-data": ImportRequestSerializer},
        responses={202: JobSerializer, 400: OpenApiResponse(description="Field errors.")},
    )
    def post(self, request: Request, slug: str) -> Response:
        from annotate.imports.uploads import import_upload_start

        serializer = ImportRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            job = import_upload_start(
                study=request.study, user=request.user, uploaded_file=serializer.validated_data["file"]
            )
        except DjangoValidationError as exc:
            raise _as_drf_error(exc) from exc
        return _job_response(job)


class SuggestRequestSerializer(serializers.Serializer):
    backend = serializers.ChoiceField(
        choices=SuggestionBackend.choices,
        required=False,
        allow_null=True,
        help_text="local or openai; omitted, the configured default (openai when a key is set).",
    )
    episode_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        allow_null=True,
        max_length=10000,
        help_text="Only these episodes (ids in this study); omitted, the uncoded episodes.",
    )
    limit = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=100000, help_text="At most this many episodes."
    )
    refresh = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also re-ask episodes whose suggestion came from an older example pool of the same prompt "
        "(the LLM's few-shot examples change as labels are added); by default new labels re-ask nothing.",
    )

    def validate_episode_ids(self, value):
        if not value:
            return value
        study = self.context["study"]
        found = set(study.episodes.filter(pk__in=value).values_list("pk", flat=True))
        missing = sorted(set(value) - found)
        if missing:
            raise serializers.ValidationError(f"Not episodes of this study: {missing[:20]}.")
        return value


class SuggestStart(APIView):
    permission_classes = [StudyMember]

    @extend_schema(
        summary="Start a suggestion batch",
        description="Machine suggestions for episodes, as a job. Suggestions never become codings on their own.",
        request=SuggestRequestSerializer,
        responses={202: JobSerializer, 400: OpenApiResponse(description="Field errors.")},
    )
    def post(self, request: Request, slug: str) -> Response:
        from annotate.suggestions.services import suggestion_batch_start

        serializer = SuggestRequestSerializer(data=request.data, context={"study": request.study})
        serializer.is_valid(raise_exception=True)
        try:
            job = suggestion_batch_start(study=request.study, user=request.user, **serializer.validated_data)
        except DjangoValidationError as exc:
            raise _as_drf_error(exc) from exc
        return _job_response(job)


class AnalysisRequestSerializer(serializers.Serializer):
    bootstrap = serializers.IntegerField(
        required=False, allow_null=True, help_text="Cluster-bootstrap replicates B (100 up to the server's maximum)."
    )
    seed = serializers.IntegerField(required=False, allow_null=True, help_text="Random seed (0 to 2^32-1).")
    cell = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="A STAGE:CAPABILITY cell to contrast."
    )
    contrast = serializers.CharField(
        required=False, allow_blank=True, max_length=100, help_text="KIND_A-KIND_B, e.g. github_issue-literature."
    )
    cap = serializers.IntegerField(required=False, allow_null=True, help_text="Cap per cluster (1-10000).")
    bca = serializers.BooleanField(required=False, help_text="Bias-corrected and accelerated intervals.")
    interval = serializers.ChoiceField(
        choices=[*CELL_METHODS, *CELL_METHOD_ALIASES],
        required=False,
        help_text=f"Cell-share interval (default {DEFAULT_CELL_METHOD}).",
    )
    version = serializers.CharField(
        required=False, allow_blank=True, max_length=150,
        help_text="An earlier codebook version of the study (NAME@VERSION); default the current one.",
    )  # fmt: skip


class AnalysisStart(APIView):
    permission_classes = [StudyMember]
    report_of_all_codings = True

    @extend_schema(
        summary="Start a bootstrap analysis",
        description=(
            "Stage x capability matrices with cluster-bootstrap confidence intervals, computed as a job "
            "(coders and owners; viewers read the results)."
        ),
        request=AnalysisRequestSerializer,
        responses={202: JobSerializer, 400: OpenApiResponse(description="Field errors.")},
    )
    def post(self, request: Request, slug: str) -> Response:
        from annotate.analysis.params import ParameterError
        from annotate.analysis.results import analysis_key
        from annotate.analysis.versions import params_for

        serializer = AnalysisRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        params = {k: v for k, v in serializer.validated_data.items() if v not in (None, "")}
        try:  # the handler's own validation, run up front so a bad request is a 400, not a failed job
            parsed, _, _ = params_for(request.study, params)
        except ParameterError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        if parsed.version:  # the job reads it as the canonical name@version
            params["version"] = parsed.version
        else:
            params.pop("version", None)
        # Tagged with its result's key, so the pages and GET .../matrix/ show it as computing that result.
        job = job_start(kind="bootstrap", study=request.study, user=request.user,
                        params={**params, "result_key": analysis_key(parsed)})  # fmt: skip
        return _job_response(job)
