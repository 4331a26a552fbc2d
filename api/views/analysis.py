"""Analysis documents: stage x capability matrices, agreement and hold-out coverage.

They are the same JSON documents `manage.py analyze|agreement|coverage --json`
print, built by annotate.analysis. Reading them needs read access to the study.

Which document is served follows the pages' rule (annotate.analysis.results.result_shown): a stored result
at the study's current data version; else, for a small study, one computed for the request (not stored);
else the stored result of older data, marked stale. The `X-Faultline-Result` header says which (current,
live or stale) and `X-Faultline-Data-Version` at which data version it was computed. A large study with no
stored result answers 409: start the computation (POST .../analysis/ for the matrices, or the page's button).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.analysis.bootstrap import over_threshold
from annotate.analysis.coders import AGREEMENT_B, agreement_document
from annotate.analysis.documents import analysis_document, coverage_document
from annotate.analysis.params import ParameterError
from annotate.analysis.results import Shown, agreement_key, analysis_key, coverage_key, result_shown
from annotate.analysis.versions import params_for, version_choice
from annotate.models import ResultKind
from api.permissions import StudyMember
from api.serializers.analysis import (
    AgreementDocumentSerializer,
    AgreementQuerySerializer,
    AnalysisDocumentSerializer,
    CoverageDocumentSerializer,
    CoverageQuerySerializer,
    MatrixQuerySerializer,
)

BAD = OpenApiResponse(description='Field errors, e.g. {"cell": ["..."]}.')
NOT_YET = OpenApiResponse(description="A large study (or a large B) with no stored result for these parameters yet.")


class MatrixView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Stage x capability matrices",
        description="Matrices per document kind with cluster-bootstrap intervals, the differences between kinds, "
        "the chosen contrast with its sensitivity checks, and the excluded episodes with their reasons.",
        parameters=[MatrixQuerySerializer],
        responses={200: AnalysisDocumentSerializer, 400: BAD, 409: NOT_YET},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = MatrixQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        study = request.study
        try:
            params, _, _ = params_for(study, {k: request.query_params.get(k) for k in query.fields})
        except ParameterError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        shown = result_shown(study, ResultKind.ANALYSIS, analysis_key(params), lambda: analysis_document(study, params),
                             inline_ok=not over_threshold(params.bootstrap))  # fmt: skip
        return _answer(shown, f"POST /api/v1/studies/{slug}/analysis/ with these parameters to compute it as a job.")


class AgreementView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Inter-coder agreement",
        description="Percent agreement, Fleiss' kappa, Krippendorff's alpha (nominal) and Gwet's AC1 per axis and "
        "overall, Cohen's kappa and confusion matrices per coder pair, bootstrap intervals over episodes, and the "
        "least agreed failure types.",
        parameters=[AgreementQuerySerializer],
        responses={200: AgreementDocumentSerializer, 400: BAD, 409: NOT_YET},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = AgreementQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        study, q = request.study, query.validated_data
        key = agreement_key(bootstrap=q.get("bootstrap", AGREEMENT_B), seed=q.get("seed", 0), version=q.get("version"))
        try:
            shown = result_shown(study, ResultKind.AGREEMENT, key, lambda: agreement_document(study, **q))
        except ValueError as exc:  # a version the study never used
            raise serializers.ValidationError({"version": [str(exc)]}) from exc
        return _answer(shown, "Start it from the study's agreement page (it runs as a job).")


class CoverageView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Hold-out coverage",
        description="The share of hold-out episodes coded to an existing type (the rest need a new type), with a "
        "Wilson interval; episodes without a usable label are counted under excluded.",
        parameters=[CoverageQuerySerializer],
        responses={200: CoverageDocumentSerializer, 400: BAD, 409: NOT_YET},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = CoverageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        study = request.study
        try:
            version = version_choice(study, query.validated_data.get("version")).key
        except ParameterError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        shown = result_shown(study, ResultKind.COVERAGE, coverage_key(version=version),
                             lambda: coverage_document(study, version=version))  # fmt: skip
        return _answer(shown, "Start it from the study's coverage page (it runs as a job).")


def _answer(shown: Shown, how: str) -> Response:
    if shown.doc is None:
        return Response({"detail": f"Not computed yet for these parameters: the study is too large to compute in a "
                                   f"request. {how}"}, status=409)  # fmt: skip
    response = Response(shown.doc)
    response["X-Faultline-Result"] = shown.state
    if shown.stored is not None and shown.state != "live":
        response["X-Faultline-Data-Version"] = str(shown.stored.data_version)
    return response
