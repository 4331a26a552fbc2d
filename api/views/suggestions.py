"""The suggestion quality report as JSON (the same numbers as the study's Suggestions page)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.coding.experiment import study_exposure_report
from annotate.suggestions.quality import suggestion_quality
from annotate.suggestions.selectors import audit_as_dict, latest_audits
from api.permissions import StudyMember


class SuggestionQualityView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Suggestion quality per backend and model",
        description="Acceptance, edit and rejection rates; top-1 and top-3 accuracy against the final labels per "
        "axis and per type; Cohen's kappa of the suggester against each coder (and the coders' own mean pairwise "
        "kappa); a calibration table of top-1 confidence against accuracy; tokens and cost.",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(suggestion_quality(request.study).as_dict())


class ExposureReportView(APIView):
    permission_classes = [StudyMember]
    report_of_all_codings = True
    required_level = "read"

    @extend_schema(
        summary="The exposure experiment per arm",
        description="For the arms `before` (suggestions shown from the start) and `after` (only after a first "
        "choice): codings and coders, accuracy against the final labels, agreement between coders (pairs), median "
        "time to save, and the automation-bias rate (accepted suggestions the final label contradicts), each with "
        "its 95% interval and size.",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = request.study
        return Response({"enabled": study.exposure_experiment, **study_exposure_report(study).as_dict()})


class SuggesterAuditView(APIView):
    permission_classes = [StudyMember]
    report_of_all_codings = True
    required_level = "read"

    @extend_schema(
        summary="The last recorded suggester audit per backend",
        description="What `audit_suggester --record` (or the Suggestions page's audit job) found: per backend the "
        "date, the number of final labels, whether it passed (null: not enough labels) and every check.",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response({"audits": [audit_as_dict(a) for a in latest_audits(request.study)]})
