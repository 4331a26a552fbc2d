"""Filters shared by the API list endpoints, the exports and the export command (django-filter).

Every filter is relative to an Episode. Documents and codings reuse the same
definitions, so `?failure_type=TUS-03&coder=7` means the same thing on
documents/, episodes/, codings/ and export/. Codes are validated against the
study's codebook: an unknown code is a 400 with a field error, not an empty
(and silently wrong) dataset.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Exists, OuterRef, Q, QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from annotate.coding.visibility import Visibility
from annotate.documents.search import document_matches
from annotate.models import Adjudication, Coding, Document, DocumentKind, Episode, Split
from taxonomy.models import Axis, AxisValue, FailureType

User = get_user_model()


def _study(request):
    return getattr(request, "study", None) if request is not None else None


def _visibility(request) -> Visibility:
    """Whose view of the codings the filters take: every caller states it (the API's permission
    class, the export service); a request without one is a programming error, not a full view."""
    visibility = getattr(request, "visibility", None)
    if visibility is None:
        raise ImproperlyConfigured("Episode filters need request.visibility (annotate.coding.visibility).")
    return visibility


def _types(request) -> QuerySet[FailureType]:
    study = _study(request)
    return FailureType.objects.filter(codebook_id=study.codebook_id) if study else FailureType.objects.none()


def _axis(axis: str):
    def values(request) -> QuerySet[AxisValue]:
        study = _study(request)
        if study is None:
            return AxisValue.objects.none()
        return AxisValue.objects.filter(codebook_id=study.codebook_id, axis=axis)

    return values


def _coders(request):
    study = _study(request)
    if study is None:
        return User.objects.none()
    return User.objects.filter(Q(memberships__study=study) | Q(codings__episode__study=study)).distinct()


CODE_HELP = (
    "Episodes with a coding or an adjudication that uses this {what} (a code of the study's codebook). "
    "In a blind study a coder's filter looks only at the codings they may see: their own, and others' on "
    "episodes they coded."
)


class EpisodeFilter(filters.FilterSet):
    kind = filters.ChoiceFilter(
        field_name="document__kind", choices=DocumentKind.choices, help_text="The document kind."
    )
    cluster = filters.CharFilter(
        field_name="document__cluster",
        help_text="The resampling cluster: repository owner/name, citation key or DOI, or incident service.",
    )
    split = filters.ChoiceFilter(choices=Split.choices, help_text="Primary or hold-out episodes.")
    coded = filters.BooleanFilter(
        method="filter_coded", help_text="true: episodes with at least one coding; false: episodes with none."
    )
    failure_type = filters.ModelChoiceFilter(
        queryset=_types, to_field_name="code", method="filter_code", help_text=CODE_HELP.format(what="failure type")
    )
    source = filters.ModelChoiceFilter(
        queryset=_axis(Axis.SOURCE),
        to_field_name="code",
        method="filter_code",
        help_text=CODE_HELP.format(what="responsibility source"),
    )
    stage = filters.ModelChoiceFilter(
        queryset=_axis(Axis.STAGE),
        to_field_name="code",
        method="filter_code",
        help_text=CODE_HELP.format(what="workflow stage"),
    )
    capability = filters.ModelChoiceFilter(
        queryset=_axis(Axis.CAPABILITY),
        to_field_name="code",
        method="filter_code",
        help_text=CODE_HELP.format(what="agent capability"),
    )
    coder = filters.ModelChoiceFilter(
        queryset=_coders, method="filter_coder", help_text="Episodes coded by this user (a user id)."
    )
    q = filters.CharFilter(
        method="filter_q",
        help_text="Full-text search of the document title and body: words (all must match, stemmed), "
        '"a phrase", -word to exclude.',
    )
    updated_since = filters.IsoDateTimeFilter(
        method="filter_updated_since",
        help_text="Episodes created, or whose document or codings changed, at or after this ISO 8601 time.",
    )

    class Meta:
        model = Episode
        fields = ["kind", "cluster", "split", "coded", "failure_type", "source", "stage", "capability", "coder"]

    # Every filter that looks at codings looks only at those the caller may see (annotate.coding.visibility).
    def _codings(self):
        return _visibility(self.request).codings(Coding.objects.all())

    def filter_coded(self, queryset, name, value):
        coded = Exists(self._codings().filter(episode=OuterRef("pk")))
        return queryset.filter(coded) if value else queryset.exclude(coded)

    @extend_schema_field(OpenApiTypes.STR)
    def filter_code(self, queryset, name, value):
        field = f"{name}_id"
        codings = self._codings().filter(episode=OuterRef("pk"), **{field: value.pk})
        visible = _visibility(self.request).adjudications(Adjudication.objects.all())
        adjudications = visible.filter(episode=OuterRef("pk"), **{field: value.pk})
        return queryset.filter(Exists(codings) | Exists(adjudications))

    @extend_schema_field(OpenApiTypes.INT)
    def filter_coder(self, queryset, name, value):
        return queryset.filter(Exists(self._codings().filter(episode=OuterRef("pk"), coder_id=value.pk)))

    def filter_q(self, queryset, name, value):
        study = _study(self.request)
        documents = Document.objects.filter(study=study) if study else Document.objects.none()
        return queryset.filter(document_id__in=document_matches(documents, value).values("pk"))

    def filter_updated_since(self, queryset, name, value):
        changed = self._codings().filter(episode=OuterRef("pk"), updated_at__gte=value)
        return queryset.filter(Q(created_at__gte=value) | Q(document__updated_at__gte=value) | Exists(changed))


class DocumentFilter(EpisodeFilter):
    """The episode filters, applied to documents: a document matches if one of its episodes does."""

    class Meta:
        model = Document
        fields: list[str] = []

    def filter_queryset(self, queryset):
        if not any(self.form.cleaned_data.get(name) not in (None, "") for name in self.filters):
            return queryset
        episodes = EpisodeFilter.filter_queryset(self, Episode.objects.all())
        return queryset.filter(Exists(episodes.filter(document=OuterRef("pk"))))


class CodingFilter(filters.FilterSet):
    """Codings by their own codes and coder, and by their episode's document and split."""

    episode = filters.NumberFilter(field_name="episode_id", help_text="Codings of this episode (an episode id).")
    kind = filters.ChoiceFilter(
        field_name="episode__document__kind", choices=DocumentKind.choices, help_text="The document kind."
    )
    cluster = filters.CharFilter(field_name="episode__document__cluster", help_text="The document's cluster.")
    split = filters.ChoiceFilter(field_name="episode__split", choices=Split.choices, help_text="The episode's split.")
    failure_type = filters.ModelChoiceFilter(
        queryset=_types, to_field_name="code", help_text="Codings with this failure type (a code)."
    )
    source = filters.ModelChoiceFilter(
        queryset=_axis(Axis.SOURCE), to_field_name="code", help_text="Codings with this source (a code)."
    )
    stage = filters.ModelChoiceFilter(
        queryset=_axis(Axis.STAGE), to_field_name="code", help_text="Codings with this stage (a code)."
    )
    capability = filters.ModelChoiceFilter(
        queryset=_axis(Axis.CAPABILITY), to_field_name="code", help_text="Codings with this capability (a code)."
    )
    coder = filters.ModelChoiceFilter(queryset=_coders, help_text="Codings by this user (a user id).")
    updated_since = filters.IsoDateTimeFilter(
        field_name="updated_at", lookup_expr="gte", help_text="Codings changed at or after this ISO 8601 time."
    )

    class Meta:
        model = Coding
        fields = ["episode", "kind", "cluster", "split", "failure_type", "source", "stage", "capability", "coder"]

    def filter_queryset(self, queryset):
        # Only the codings the caller may see are filtered at all, whatever the list started from.
        return super().filter_queryset(_visibility(self.request).codings(queryset))
