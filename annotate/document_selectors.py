"""Reads for the documents pages: a filtered, cursor-paginated list that stays fast at 100,000 rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from .models import Document, DocumentKind, Episode, Split, Study

PAGE_SIZE = 50
LIST_FIELDS = ("id", "kind", "external_id", "url", "cluster", "title", "labels", "imported_at", "meta")


@dataclass(frozen=True)
class DocumentFilters:
    """The list's filters, parsed leniently from a query string (unknown values are ignored)."""

    q: str = ""
    kind: str = ""
    cluster: str = ""
    coded: str = ""  # "coded" | "uncoded"
    split: str = ""
    label: str = ""

    @classmethod
    def from_query(cls, query) -> DocumentFilters:
        def get(name: str, allowed=None) -> str:
            value = (query.get(name) or "").strip()[:300]
            return value if allowed is None or value in allowed else ""

        return cls(
            q=get("q"),
            kind=get("kind", DocumentKind.values),
            cluster=get("cluster"),
            coded=get("coded", ("coded", "uncoded")),
            split=get("split", Split.values),
            label=get("label").replace(",", " "),
        )

    def as_query(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}

    @property
    def active(self) -> bool:
        return bool(self.as_query())


@dataclass
class DocumentPage:
    rows: list[Document]
    total: int | None  # None when a text search makes counting a full scan
    next_after: int | None = None
    prev_before: int | None = None
    episodes: dict[int, dict] = field(default_factory=dict)


def documents_filtered(study: Study, filters: DocumentFilters) -> QuerySet[Document]:
    """The study's documents matching the filters; no body or raw is loaded."""
    qs = Document.objects.filter(study=study)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.cluster:
        qs = qs.filter(cluster=filters.cluster)
    if filters.label:
        qs = qs.filter(labels__icontains=f",{filters.label},")
    if filters.q:
        qs = qs.filter(Q(title__icontains=filters.q) | Q(body__icontains=filters.q))
    if filters.coded:
        coded = Exists(Episode.objects.filter(document=OuterRef("pk"), n_codings__gt=0))
        qs = qs.filter(coded if filters.coded == "coded" else ~coded)
    if filters.split:
        qs = qs.filter(Exists(Episode.objects.filter(document=OuterRef("pk"), split=filters.split)))
    return qs.only(*LIST_FIELDS)


def documents_page(
    study: Study, filters: DocumentFilters, *, after: int | None = None, before: int | None = None
) -> DocumentPage:
    """One page in id order, by keyset cursor (`after`/`before` an id): 2-3 queries at any depth."""
    qs = documents_filtered(study, filters)
    if before is not None:
        rows = list(qs.filter(pk__lt=before).order_by("-pk")[: PAGE_SIZE + 1])
        has_more_before = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE][::-1]
        has_more_after = True
    else:
        if after is not None:
            qs = qs.filter(pk__gt=after)
        rows = list(qs.order_by("pk")[: PAGE_SIZE + 1])
        has_more_after = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        has_more_before = after is not None
    total = None if filters.q else documents_filtered(study, filters).count()
    page = DocumentPage(rows=rows, total=total)
    if rows:
        page.next_after = rows[-1].pk if has_more_after else None
        page.prev_before = rows[0].pk if has_more_before else None
        stats = (
            Episode.objects.filter(document_id__in=[d.pk for d in rows])
            .values("document_id")
            .annotate(
                n=Count("id"),
                coded=Count("id", filter=Q(n_codings__gt=0)),
                holdout=Count("id", filter=Q(split=Split.HOLDOUT)),
            )
        )
        page.episodes = {row["document_id"]: row for row in stats}
    return page


def document_labels(document: Document) -> list[str]:
    return [name for name in document.labels.strip(",").split(",") if name]
