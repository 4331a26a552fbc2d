"""A study's report bundle (annotate.reports): report.html and report.pdf, figures, LaTeX and CSV tables,
the methods paragraph, provenance and the dataset export, as one zip.

GET answers inline for studies up to FAULTLINE_REPORT_SYNC_EPISODES episodes (and B up to the bootstrap job
threshold), and for larger ones from a finished report job with the same parameters on the current labels;
otherwise 409, naming the POST that starts the job. GET never starts anything. POST starts the job (202); its
zip is then at GET /api/v1/jobs/{id}/file/.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.analysis.bootstrap import over_threshold
from annotate.analysis.params import ParameterError
from annotate.models import Episode
from annotate.reports.services import (
    PARAM_KEYS,
    report_build_zip,
    report_file_path,
    report_finished,
    report_params,
    report_start,
)
from api.permissions import StudyMember
from api.serializers.analysis import MatrixQuerySerializer
from api.serializers.core import JobSerializer

ZIP = "application/zip"


def _raw(data) -> dict:
    return {k: data.get(k) for k in PARAM_KEYS}


class ReportView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Download the study's report bundle",
        description=__doc__,
        parameters=[MatrixQuerySerializer],
        responses={
            (200, ZIP): OpenApiTypes.BINARY,
            400: OpenApiResponse(description="Field errors."),
            409: OpenApiResponse(description="Too large to build inline and no finished report job: POST first."),
        },
    )
    def get(self, request: Request, slug: str):
        study = request.study
        try:
            params = report_params(study, _raw(request.query_params))
        except ParameterError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        large = over_threshold(params.bootstrap) or (
            Episode.objects.filter(study=study).count() > settings.FAULTLINE_REPORT_SYNC_EPISODES
        )
        if large:
            job = report_finished(study, params)
            if job is None:
                return Response(
                    {"detail": f"This report is built by a job: POST /api/v1/studies/{slug}/report/ with the same "
                               "parameters, then download GET /api/v1/jobs/{id}/file/ (or GET this URL again)."},
                    status=status.HTTP_409_CONFLICT,
                )  # fmt: skip
            return FileResponse(report_file_path(job).open("rb"), as_attachment=True,
                                filename=f"{slug}-report.zip", content_type=ZIP)  # fmt: skip
        # A temporary file, deleted when the response closes it.
        out = tempfile.TemporaryFile()  # noqa: SIM115 - FileResponse closes it
        with tempfile.TemporaryDirectory(prefix="faultline-report-") as tmp:
            zip_path = Path(tmp) / "report.zip"
            report_build_zip(study=study, params=params, zip_path=zip_path)
            with zip_path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    out.write(chunk)
        out.seek(0)
        return FileResponse(out, as_attachment=True, filename=f"{slug}-report.zip", content_type=ZIP)

    @extend_schema(
        summary="Start a report job",
        description="Build the report bundle as a job (any member who may read the analysis); poll jobs/{id}/, "
        "then download jobs/{id}/file/.",
        request=MatrixQuerySerializer,
        responses={202: JobSerializer, 400: OpenApiResponse(description="Field errors.")},
    )
    def post(self, request: Request, slug: str) -> Response:
        try:
            job = report_start(study=request.study, user=request.user, raw=_raw(request.data))
        except ParameterError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
