"""The suggestion quality report as JSON (the same numbers as the study's Suggestions page)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.suggest_quality import suggestion_quality

from ..permissions import StudyMember


class SuggestionQualityView(APIView):
    permission_classes = [StudyMember]
    required_level = "read"

    @extend_schema(
        summary="Suggestion quality per backend and model",
        description="Acceptance, edit and rejection rates; top-1 and top-3 accuracy against the final labels per "
        "axis and per type; Cohen's kappa of the suggester against each coder (and the coders' own mean pairwise "
        "kappa); a calibration table of top-1 confidence against accuracy; tokens and cost.",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(suggestion_quality(request.study).as_dict())
