"""Analysis documents: stage x capability matrices, agreement and hold-out coverage.

They are the same JSON documents `manage.py analyze|agreement|coverage --json`
print, built by annotate.analysis. Reading them needs read access to the study.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.analysis.arrays import codebook_axes
from annotate.analysis.bootstrap import over_threshold
from annotate.analysis.coders import agreement_document
from annotate.analysis.documents import analysis_document, coverage_document, finished_bootstrap
from annotate.analysis.params import ParameterError, parse_params
from api.permissions import StudyMember
from api.serializers.analysis import (
    AgreementDocumentSerializer,
    AgreementQuerySerializer,
    AnalysisDocumentSerializer,
    CoverageDocumentSerializer,
    MatrixQuerySerializer,
)

BAD = OpenApiResponse(description='Field errors, e.g. {"cell": ["..."]}.')


class MatrixView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Stage x capability matrices",
        description="Matrices per document kind with cluster-bootstrap intervals, the differences between kinds, "
        "the chosen contrast with its sensitivity checks, and the excluded episodes with their reasons.",
        parameters=[MatrixQuerySerializer],
        responses={200: AnalysisDocumentSerializer, 400: BAD},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = MatrixQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        study = request.study
        try:
            params = parse_params(codebook_axes(study), **{k: request.query_params.get(k) for k in query.fields})
        except ParameterError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        if over_threshold(params.bootstrap):
            doc = finished_bootstrap(study, params)
            if doc is None:
                raise serializers.ValidationError(
                    {"bootstrap": [f"B = {params.bootstrap:,} runs as a job: POST /api/v1/studies/{slug}/analysis/ "
                                   "and read the job's result, or ask for fewer replicates."]}
                )  # fmt: skip
            return Response(doc)
        return Response(analysis_document(study, params))


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
        responses={200: AgreementDocumentSerializer, 400: BAD},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = AgreementQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            return Response(agreement_document(request.study, **query.validated_data))
        except ValueError as exc:  # a version the study never used
            raise serializers.ValidationError({"version": [str(exc)]}) from exc


class CoverageView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"
    report_of_all_codings = True

    @extend_schema(
        summary="Hold-out coverage",
        description="The share of hold-out episodes coded to an existing type (the rest need a new type), with a "
        "Wilson interval; episodes without a usable label are counted under excluded.",
        responses={200: CoverageDocumentSerializer},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(coverage_document(request.study))
