"""Incident intake and triage for teams that run agents in production."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotate.incidents.services import SEVERITIES, incident_create, incident_move
from annotate.models import Document, TriageStatus
from api import selectors
from api.permissions import study_membership
from api.serializers.incidents import (
    IncidentCreatedSerializer,
    IncidentInSerializer,
    IncidentSerializer,
    TriageMoveSerializer,
)


class IncidentFilter(filters.FilterSet):
    study = filters.CharFilter(field_name="study__slug", help_text="Only this study's incidents (its slug).")
    triage_status = filters.ChoiceFilter(choices=TriageStatus.choices, help_text="new, triaged or resolved.")
    service = filters.CharFilter(field_name="cluster", help_text="Only this service's incidents.")
    severity = filters.ChoiceFilter(choices=[(s, s) for s in SEVERITIES], help_text="Only this severity.")

    class Meta:
        model = Document
        fields = ["study", "triage_status", "service", "severity"]


def _field_errors(exc: DjangoValidationError) -> serializers.ValidationError:
    return serializers.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})


@extend_schema_view(
    list=extend_schema(summary="Incidents", description="Incidents of your studies, newest last (cursor pages)."),
    retrieve=extend_schema(summary="An incident", description="An incident with its artifacts and triage history."),
)
class IncidentViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = IncidentSerializer
    filterset_class = IncidentFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Document.objects.none()
        return selectors.incidents_for(self.request.user)

    @extend_schema(
        summary="Report an incident",
        description=(
            "Store an incident as a document of kind incident (cluster = service) with one episode and its "
            "artifacts, and queue a suggestion. You must be a coder or owner of the study (non-members 404, "
            "viewers 403), and the study must accept incidents: a research study answers 400 on `study`, naming "
            "the studies you may post to, so incidents never join its coders' queue. A bad payload is a 400 with "
            "field errors and stores nothing."
        ),
        request=IncidentInSerializer,
        responses={
            201: IncidentCreatedSerializer,
            200: OpenApiResponse(IncidentCreatedSerializer, description="Already stored (same external_id)."),
            400: OpenApiResponse(description="Field errors."),
        },
    )
    def create(self, request: Request, *args, **kwargs) -> Response:
        slug = request.data.get("study") if hasattr(request.data, "get") else None
        membership = study_membership(request, slug, "write") if isinstance(slug, str) and slug else None
        payload = IncidentInSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            result = incident_create(study=membership.study, user=request.user, data=payload.to_data())
        except DjangoValidationError as exc:
            raise _field_errors(exc) from exc
        document = self.get_queryset().get(pk=result.document.pk)
        document.suggestion_job = result.suggestion_job.pk if result.suggestion_job else None
        document.created = result.created
        code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(IncidentCreatedSerializer(document).data, status=code)

    @extend_schema(
        summary="Move an incident",
        description=(
            "new -> triaged -> resolved (or reopen), with an assignee and a note; recorded in the history. "
            "Triaging sends the study's signed webhook. Coders and owners only."
        ),
        request=TriageMoveSerializer,
        responses={200: IncidentSerializer, 400: OpenApiResponse(description="Field errors.")},
    )
    @action(detail=True, methods=["post"])
    def triage(self, request: Request, pk=None) -> Response:
        document = self.get_object()
        study_membership(request, document.study.slug, "write")
        move = TriageMoveSerializer(data=request.data)
        move.is_valid(raise_exception=True)
        username = move.validated_data.get("assignee")
        assignee = get_user_model().objects.filter(username=username).first() if username else None
        if username and assignee is None:
            raise serializers.ValidationError({"assignee": [f"No user '{username}'."]})
        try:
            incident_move(
                document=document, user=request.user, to_status=move.validated_data["status"], assignee=assignee,
                note=move.validated_data.get("note", ""),
            )  # fmt: skip
        except DjangoValidationError as exc:
            raise _field_errors(exc) from exc
        return Response(IncidentSerializer(self.get_queryset().get(pk=document.pk)).data)
