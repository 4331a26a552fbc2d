"""The dataset export: JSONL and CSV stream; Parquet is written in batches, through a job for large studies."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import FileResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.coding.visibility import BLIND_REPORT, coding_visibility
from annotate.exports import rows as exports
from annotate.exports.datasets import export_episodes, export_file_path
from annotate.exports.filters import EpisodeFilter
from annotate.exports.parquet import parquet_write
from annotate.jobs.runner import job_start
from annotate.models import JobStatus, Role
from annotate.reports.services import report_file_path
from api import selectors
from api.permissions import StudyMember, study_membership
from api.serializers.core import JobSerializer

MEDIA = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv",
    "parquet": "application/vnd.apache.parquet",
    "cases": "application/x-ndjson",
}


class _JsonOnly(BaseContentNegotiation):
    """`format` is the export's own parameter here, not DRF's renderer override; errors are JSON."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ExportParams(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=exports.FORMATS,
        default="jsonl",
        help_text="jsonl, csv, parquet, or cases (one regression case per coded trace episode, as JSON Lines).",
    )
    coders = serializers.ChoiceField(
        choices=[exports.CODERS_PSEUDONYMOUS, exports.CODERS_USERNAMES],
        default=exports.CODERS_PSEUDONYMOUS,
        help_text="pseudonymous (stable per study) or usernames (owners only).",
    )
    manifest = serializers.BooleanField(
        default=False, help_text="Return the manifest (rows, sha256, codebook, filters, time) instead of the file."
    )
    run_async = serializers.BooleanField(
        default=False, help_text="Parquet only: always build the file in a job (202 with the job)."
    )


class ManifestSerializer(serializers.Serializer):
    export_version = serializers.IntegerField(help_text="Version of the export format.")
    study = serializers.CharField(help_text="The study's slug.")
    study_name = serializers.CharField(help_text="The study's name.")
    format = serializers.CharField(help_text="jsonl, csv or parquet.")
    rows = serializers.IntegerField(help_text="Rows (episodes) in the file.")
    bytes = serializers.IntegerField(help_text="Size of the file.")
    sha256 = serializers.CharField(help_text="sha256 of the file's bytes.")
    codebook = serializers.CharField(help_text="The codebook, name@version.")
    coders_per_episode = serializers.IntegerField(help_text="The study's k.")
    label_rule = serializers.CharField(help_text="consensus or single_coder.")
    label_coder = serializers.CharField(
        allow_null=True, help_text="single_coder: the coder whose labels are final, named as in the rows."
    )
    coders = serializers.CharField(help_text="pseudonymous or usernames.")
    csv_coder_slots = serializers.IntegerField(allow_null=True, help_text="CSV only: coder column groups.")
    filters = serializers.DictField(child=serializers.CharField(), help_text="The filters applied.")
    generated_at = serializers.DateTimeField(help_text="When the manifest was made.")


def _filter_parameters() -> list[OpenApiParameter]:
    out = []
    for name, f in EpisodeFilter.base_filters.items():
        kind = {"BooleanFilter": bool, "IsoDateTimeFilter": OpenApiTypes.DATETIME}.get(type(f).__name__, str)
        if name == "coder":
            kind = int
        enum = [c[0] for c in f.extra["choices"]] if "choices" in f.extra else None
        out.append(OpenApiParameter(name, kind, description=f.extra.get("help_text", ""), enum=enum))
    return out


def _check_access(membership, coders: str) -> None:
    if coders == exports.CODERS_USERNAMES and membership.role != Role.OWNER:
        raise PermissionDenied("Only the study's owners may export coders' usernames.")
    if not coding_visibility(membership).sees_aggregates:
        raise PermissionDenied(BLIND_REPORT)


class ExportView(APIView):
    permission_classes = [StudyMember]
    report_of_all_codings = True
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JsonOnly

    @extend_schema(
        summary="Export the labelled dataset",
        description=(
            "One row per episode: document, episode text, the final label (adjudicated, agreed, or none with the "
            "reason) as four codes and names, each coder's codes (pseudonymised), suggestion provenance, the "
            "codebook name@version and timestamps. JSONL and CSV stream; Parquet is returned directly for small "
            "studies and built by a job (202) for large ones. Accepts the episode list's filters."
        ),
        parameters=[
            OpenApiParameter(
                "format", str, enum=list(exports.FORMATS), description="jsonl (default), csv, parquet or cases."
            ),
            OpenApiParameter(
                "coders",
                str,
                enum=[exports.CODERS_PSEUDONYMOUS, exports.CODERS_USERNAMES],
                description="pseudonymous (default) or usernames (owners only).",
            ),
            OpenApiParameter("manifest", bool, description="Return the manifest instead of the file."),
            OpenApiParameter("run_async", bool, description="Parquet: always build it in a job."),
            *_filter_parameters(),
        ],
        responses={
            (200, MEDIA["jsonl"]): OpenApiTypes.BINARY,  # jsonl and cases
            (200, MEDIA["csv"]): OpenApiTypes.BINARY,
            (200, MEDIA["parquet"]): OpenApiTypes.BINARY,
            (200, "application/json"): ManifestSerializer,
            (202, "application/json"): JobSerializer,
            (400, "application/json"): OpenApiResponse(description="Field errors in the parameters or filters."),
        },
    )
    def get(self, request: Request, slug: str):
        params = ExportParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        fmt, coders = params.validated_data["format"], params.validated_data["coders"]
        _check_access(request.membership, coders)
        filters = {k: v for k, v in request.query_params.items() if k in EpisodeFilter.base_filters}
        try:
            episodes = export_episodes(study=request.study, filters=filters, visibility=request.visibility)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        if fmt == "parquet":
            return self._parquet(request, episodes, filters, coders, params.validated_data)
        digest = exports.Digest()
        stream = exports.export_stream(study=request.study, episodes=episodes, fmt=fmt, coders=coders, digest=digest)
        if params.validated_data["manifest"]:
            for _chunk in stream:
                pass
            return Response(self._manifest(request, fmt, digest, filters, coders, episodes))
        response = StreamingHttpResponse(stream, content_type=MEDIA[fmt])
        name = f"{request.study.slug}.cases.jsonl" if fmt == "cases" else f"{request.study.slug}.{fmt}"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        response["X-Faultline-Codebook"] = request.study.codebook.label
        return response

    def _manifest(self, request, fmt, digest, filters, coders, episodes) -> dict:
        slots = exports.coder_slots(request.study, episodes) if fmt == "csv" else None
        return exports.manifest(
            study=request.study, fmt=fmt, digest=digest, filters=filters, coders=coders, slots=slots
        )

    def _parquet(self, request, episodes, filters, coders, options):
        if options["run_async"] or episodes.count() > settings.FAULTLINE_EXPORT_PARQUET_SYNC_ROWS:
            job = job_start(
                kind="export_parquet", study=request.study, user=request.user,
                params={"filters": filters, "coders": coders},
            )  # fmt: skip
            return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        # A temporary file, deleted when the response closes it: Parquet needs a seekable sink.
        out = tempfile.TemporaryFile()  # noqa: SIM115 - FileResponse closes it
        digest = exports.Digest()
        parquet_write(digest.count(exports.export_rows(request.study, episodes, coders=coders)), out)
        if options["manifest"]:
            out.seek(0)
            for _chunk in digest.through(iter(lambda: out.read(1 << 20), b"")):
                pass
            out.close()
            return Response(self._manifest(request, "parquet", digest, filters, coders, episodes))
        out.seek(0)
        return FileResponse(
            out, as_attachment=True, filename=f"{request.study.slug}.parquet", content_type=MEDIA["parquet"]
        )


@extend_schema(
    summary="Download a job's export file",
    description="The file a job wrote, once it has succeeded: the Parquet file of an export_parquet job, the zip "
    "of a report job.",
    responses={
        (200, MEDIA["parquet"]): OpenApiTypes.BINARY,
        (200, "application/zip"): OpenApiTypes.BINARY,
        404: OpenApiResponse(description="No such file."),
    },
)
class JobFile(generics.GenericAPIView):
    filter_backends: list = []

    def get_queryset(self):
        return selectors.jobs_visible(self.request.user)

    def get(self, request: Request, pk: int):
        job = self.get_object()
        if job.kind not in ("export_parquet", "report") or job.status != JobStatus.SUCCESS or job.study is None:
            raise NotFound("This job has no file (yet).")
        _check_access(study_membership(request, job.study.slug, "read"), job.params.get("coders", ""))
        path: Path = export_file_path(job) if job.kind == "export_parquet" else report_file_path(job)
        if not path.exists():
            raise NotFound("The job's file is gone; start the job again.")
        media = MEDIA["parquet"] if job.kind == "export_parquet" else "application/zip"
        return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type=media)
