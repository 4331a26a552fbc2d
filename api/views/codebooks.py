"""Codebooks and their failure types (read-only; codebooks are shared by all studies)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from api import selectors
from api.serializers.core import CodebookDetailSerializer, CodebookSerializer, FailureTypeSerializer


@extend_schema_view(
    list=extend_schema(summary="List codebooks", description="All codebook versions, oldest first."),
    retrieve=extend_schema(summary="A codebook", description="A codebook version with its axis values."),
)
class CodebookViewSet(viewsets.ReadOnlyModelViewSet):
    filter_backends: list = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator, with no user to ask about
            return selectors.codebooks(None).none()
        return selectors.codebooks(self.request.user)

    def get_serializer_class(self):
        if self.action == "retrieve":
            return CodebookDetailSerializer
        if self.action == "types":
            return FailureTypeSerializer
        return CodebookSerializer

    @extend_schema(
        summary="A codebook's failure types",
        description="The failure types of one codebook version, in codebook order.",
        responses=FailureTypeSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def types(self, request: Request, pk=None) -> Response:
        codebook = self.get_object()
        types = selectors.codebook_types(codebook)
        page = self.paginate_queryset(types)
        return self.get_paginated_response(FailureTypeSerializer(page, many=True).data)
