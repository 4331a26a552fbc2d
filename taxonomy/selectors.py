"""Reads of the codebook shared by pages, the API and the suggesters."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from taxonomy.models import Axis, AxisValue, Category, Codebook, FailureType


def codebooks_for(user) -> QuerySet[Codebook]:
    """The codebooks `user` may read: every shared one, and the private ones of their studies.

    The study side is reached by the reverse relation's name (`studies`, Study.codebook) rather than
    by importing the apps above the codebook, which know it and not the other way round.
    """
    theirs = Codebook.objects.filter(private=True, studies__memberships__user=user).values("pk")
    return Codebook.objects.filter(Q(private=False) | Q(pk__in=theirs))


def failure_types(codebook: Codebook) -> QuerySet[FailureType]:
    return FailureType.objects.filter(codebook=codebook).select_related("category").order_by("order")


def axis_values(codebook: Codebook) -> dict[str, list[AxisValue]]:
    """The codebook's axis values by axis, in codebook order."""
    grouped: dict[str, list[AxisValue]] = {axis: [] for axis in Axis.values}
    for value in AxisValue.objects.filter(codebook=codebook).order_by("axis", "order"):
        grouped[value.axis].append(value)
    return grouped


@dataclass(frozen=True)
class TypeFilter:
    q: str = ""
    source: str = ""
    stage: str = ""
    capability: str = ""
    category: str = ""

    @property
    def active(self) -> bool:
        return any((self.q, self.source, self.stage, self.capability, self.category))


def _haystack(t: FailureType) -> str:
    return " ".join([t.code, t.name, t.definition, t.example, *t.indicators, t.category.name]).lower()


def filter_types(types: list[FailureType], f: TypeFilter) -> list[FailureType]:
    """Filter a codebook's types in memory: a codebook has tens of types, not thousands.

    Every word of the query must appear in the code, name, definition, indicators,
    example or category name; axis filters match the type's typical values.
    """
    words = f.q.lower().split()
    out = []
    for t in types:
        if f.source and t.typical_source != f.source:
            continue
        if f.stage and f.stage not in t.typical_stages:
            continue
        if f.capability and f.capability not in t.typical_capabilities:
            continue
        if f.category and t.category.code != f.category:
            continue
        if words:
            hay = _haystack(t)
            if not all(w in hay for w in words):
                continue
        out.append(t)
    return out


def group_by_category(types: list[FailureType]) -> list[tuple[Category, list[FailureType]]]:
    groups: dict[int, tuple[Category, list[FailureType]]] = {}
    for t in types:
        groups.setdefault(t.category_id, (t.category, []))[1].append(t)
    return sorted(groups.values(), key=lambda g: g[0].order)
