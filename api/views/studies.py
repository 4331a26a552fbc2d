"""Studies and their documents, episodes and codings.

Coding writes go through annotate.coding.services.coding_save, exactly as the
coding workspace does: the same validation, optimistic locking and history.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from annotate.coding.services import CodingConflict, CodingValues, EpisodeFull, coding_save
from annotate.exports.filters import CodingFilter, DocumentFilter, EpisodeFilter
from annotate.models import Coding, Document, Episode, Study
from api import selectors
from api.permissions import StudyMember
from api.serializers.core import (
    CodingSerializer,
    CodingWriteSerializer,
    ConflictSerializer,
    DocumentSerializer,
    EpisodeSerializer,
    StudySerializer,
)


@extend_schema_view(
    list=extend_schema(summary="Your studies", description="The studies you are a member of, with your role."),
    retrieve=extend_schema(summary="A study", description="One of your studies. Non-members get 404."),
)
class StudyViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = StudySerializer
    permission_classes = [StudyMember]
    lookup_field = "slug"
    filter_backends: list = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Study.objects.none()
        return selectors.studies_for(self.request.user)


@extend_schema(
    summary="A study's documents",
    description="Documents of the study, filtered through their episodes (same filters as episodes/).",
)
class DocumentList(generics.ListAPIView):
    serializer_class = DocumentSerializer
    permission_classes = [StudyMember]
    filterset_class = DocumentFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Document.objects.none()
        return selectors.documents(self.request.study)


@extend_schema(summary="A study's episodes", description="Episodes of the study, one failure each.")
class EpisodeList(generics.ListAPIView):
    serializer_class = EpisodeSerializer
    permission_classes = [StudyMember]
    filterset_class = EpisodeFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Episode.objects.none()
        return selectors.episodes(self.request.study)


@extend_schema_view(
    get=extend_schema(
        summary="A study's codings",
        description="Codings of the study that you may see. In a blind study a coder sees their own codings and "
        "others' codings of the episodes they coded; with the adjudicator duty also those of complete episodes.",
    ),
    post=extend_schema(
        summary="Save your coding",
        description=(
            "Create your coding of an episode, or update it by sending the `version` you last saw. "
            "The same service as the coding page, with the same refusals: codes are checked against the study's "
            "codebook and evidence must be a passage of the episode text with offsets inside it (400 with field "
            "errors); an episode that has its k coders or is adjudicated is a 409; a stale version is a 409 with "
            "the coding as it is now. Every change is kept in history. Viewers get 403."
        ),
        request=CodingWriteSerializer,
        responses={
            201: CodingSerializer,
            200: CodingSerializer,
            400: OpenApiResponse(description="Field errors."),
            409: ConflictSerializer,
        },
    ),
)
class CodingList(generics.ListCreateAPIView):
    permission_classes = [StudyMember]
    filterset_class = CodingFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Coding.objects.none()
        return selectors.codings_visible(self.request.membership)

    def get_serializer_class(self):
        return CodingWriteSerializer if self.request.method == "POST" else CodingSerializer

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "study": getattr(self.request, "study", None)}

    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        episode, version, suggestion = data.pop("episode"), data.pop("version", None), data.pop("from_suggestion", None)
        try:
            coding = coding_save(
                episode=episode, coder=request.user, values=CodingValues(**data), version=version,
                from_suggestion=suggestion, has_coding=getattr(episode, "has_mine", None),
            )  # fmt: skip
        except EpisodeFull as full:
            return Response({"detail": str(full)}, status=status.HTTP_409_CONFLICT)
        except CodingConflict as conflict:
            current = CodingSerializer(conflict.current).data if conflict.current is not None else None
            return Response({"detail": str(conflict), "current": current}, status=status.HTTP_409_CONFLICT)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        created = coding.version == 1 and not version
        return Response(CodingSerializer(coding).data, status=201 if created else 200)
