"""Reads for the documents pages: a filtered, cursor-paginated list whose cost does not grow with the study.

Pages are read by keyset, never OFFSET; the total is counted only up to COUNT_LIMIT
(the page says "1,000+" beyond it), and a text search ranks a bounded set of
candidates (annotate.documents.search), so a page at 1,000,000 documents reads about what
it reads at 10,000.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.safestring import SafeString

from annotate.documents import search
from annotate.documents.search import (
    SEARCH_INDEX_JOB,
    document_search,
    search_after,
    search_cursor,
    search_pending,
    search_snippets,
    search_study,
)
from annotate.models import Document, DocumentKind, Episode, Job, JobStatus, Split, Study

PAGE_SIZE = 50
COUNT_LIMIT = 1000  # the list counts its matches up to here, and shows "1,000+" beyond
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
    total: int | None  # up to COUNT_LIMIT; None for a text search (its pages are ranked, not counted)
    total_capped: bool = False  # there are more than COUNT_LIMIT
    candidates_cut: bool = False  # a search found more than `candidate_limit` matches: only the newest were ranked
    candidate_limit: int = 0
    search_pending: int = 0  # a search: the study's documents still being indexed, which it cannot find yet
    search_failed: bool = False  # their indexing failed, and no job is indexing them now
    search_retry_at: datetime | None = None  # then: when the sweep tries again (None: at its next round)
    next_after: int | str | None = None  # an id, or "rank:id" for a search
    prev_before: int | None = None
    episodes: dict[int, dict] = field(default_factory=dict)
    snippets: dict[int, SafeString] = field(default_factory=dict)


def documents_filtered(
    study: Study, filters: DocumentFilters, *, for_search: bool = False, visible: Q | None = None
) -> QuerySet[Document]:
    """The study's documents matching the filters; no body or raw is loaded.

    `visible` (annotate.coding.visibility's `episodes_q()`): the episodes whose codings the member may
    see; the `coded` filter counts only those, so a blind coder cannot find what others have coded.
    `for_search`: the study is named as search_study() does, so that the search's newest matches
    are read from the (study, id) index on PostgreSQL."""
    qs = Document.objects.filter(search_study(study.pk) if for_search else Q(study=study))
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.cluster:
        qs = qs.filter(cluster=filters.cluster)
    if filters.label:
        qs = qs.filter(labels__icontains=f",{filters.label},")
    if filters.coded:
        # The study too (a document's episodes are its study's): the partial index episode_coded_idx then
        # finds the coded documents when they are few, instead of a scan of every episode.
        episodes = Episode.objects.filter(study=study, document=OuterRef("pk"), n_codings__gt=0)
        coded = Exists(episodes.filter(visible) if visible is not None else episodes)
        qs = qs.filter(coded if filters.coded == "coded" else ~coded)
    if filters.split:
        qs = qs.filter(Exists(Episode.objects.filter(document=OuterRef("pk"), split=filters.split)))
    return qs.only(*LIST_FIELDS)


def _id(value: str | int | None) -> int | None:
    if isinstance(value, int):
        return value
    return int(value) if value and value.isdigit() else None


def documents_page(
    study: Study,
    filters: DocumentFilters,
    *,
    after: str | int | None = None,
    before: str | int | None = None,
    visible: Q | None = None,
) -> DocumentPage:
    """One page by keyset cursor, never OFFSET: in id order (`after`/`before` an id), or for a text
    search ranked best first (`after` is "rank:id"), with highlighted snippets. 3-4 queries at any depth.
    `visible` limits what counts as coded, as in documents_filtered."""
    if filters.q:
        return _search_page(study, filters, after=str(after or ""), visible=visible)
    after, before = _id(after), _id(before)
    qs = documents_filtered(study, filters, visible=visible)
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
    # A bounded count (COUNT(*) over a LIMIT subquery): exact for small results, "1,000+" for large ones.
    total = documents_filtered(study, filters, visible=visible).order_by()[: COUNT_LIMIT + 1].count()
    page = DocumentPage(rows=rows, total=min(total, COUNT_LIMIT), total_capped=total > COUNT_LIMIT)
    if rows:
        page.next_after = rows[-1].pk if has_more_after else None
        page.prev_before = rows[0].pk if has_more_before else None
    _episode_stats(page, visible)
    return page


def _search_page(study: Study, filters: DocumentFilters, *, after: str, visible: Q | None) -> DocumentPage:
    qs = document_search(documents_filtered(study, filters, for_search=True, visible=visible), filters.q)
    if after:
        qs = search_after(qs, after)
    rows = list(qs[: PAGE_SIZE + 1])
    page = DocumentPage(rows=rows[:PAGE_SIZE], total=None, candidate_limit=search.SEARCH_CANDIDATES)
    page.candidates_cut = not after and bool(rows) and rows[0].search_pool > page.candidate_limit
    if len(rows) > PAGE_SIZE:
        page.next_after = search_cursor(page.rows[-1])
    page.snippets = search_snippets([d.pk for d in page.rows], filters.q)
    page.search_pending = search_pending(study.pk)
    if page.search_pending:
        retry_at = search_index_stalled(study.pk)
        page.search_failed = retry_at is not None
        page.search_retry_at = retry_at if retry_at is not None and retry_at > timezone.now() else None
    _episode_stats(page, visible)
    return page


def _episode_stats(page: DocumentPage, visible: Q | None) -> None:
    rows = page.rows
    if rows:
        stats = (
            Episode.objects.filter(document_id__in=[d.pk for d in rows])
            .values("document_id")
            .annotate(
                n=Count("id"),
                coded=Count("id", filter=Q(n_codings__gt=0) & (visible if visible is not None else Q())),
                holdout=Count("id", filter=Q(split=Split.HOLDOUT)),
            )
        )
        page.episodes = {row["document_id"]: row for row in stats}


def document_labels(document: Document) -> list[str]:
    return [name for name in document.labels.strip(",").split(",") if name]


# A study whose search_index job failed gets a new one from the sweep after SEARCH_RETRY_BASE_S, then twice as long
# after each further failure in a row, up to SEARCH_RETRY_MAX_S: a passing fault (a restarted server, a full disk)
# heals without anyone starting a job, and one that persists costs a retry an hour, not a job per sweep.
SEARCH_RETRY_BASE_S = 60
SEARCH_RETRY_MAX_S = 3600


def search_retry_after(*, failures: int) -> timedelta:
    """How long after the last of `failures` search_index failures in a row the sweep starts another."""
    return timedelta(seconds=min(SEARCH_RETRY_MAX_S, SEARCH_RETRY_BASE_S * 2 ** max(0, failures - 1)))


def search_index_failures(study_id: int) -> tuple[int, Job | None]:
    """The study's search_index jobs that failed since its last successful one (how many, and the latest)."""
    jobs = Job.objects.filter(study_id=study_id, kind=SEARCH_INDEX_JOB)
    last_success = jobs.filter(status=JobStatus.SUCCESS).order_by("-pk").values_list("pk", flat=True).first()
    failed = jobs.filter(status=JobStatus.FAILED)
    if last_success is not None:
        failed = failed.filter(pk__gt=last_success)
    latest = failed.order_by("-pk").first()
    return (failed.count() if latest else 0), latest


def search_retry_at(study_id: int) -> datetime | None:
    """When the sweep will next start indexing a study whose last search_index job failed, else None."""
    failures, latest = search_index_failures(study_id)
    if latest is None:
        return None
    return (latest.finished_at or latest.created_at) + search_retry_after(failures=failures)


def search_index_stalled(study_id: int) -> datetime | None:
    """For a study with documents still waiting for their vectors: when indexing them will be tried again, if
    its last search_index job failed and none is waiting or running now; else None (indexing is under way)."""
    unfinished = Job.objects.filter(study_id=study_id, kind=SEARCH_INDEX_JOB,
                                    status__in=(JobStatus.PENDING, JobStatus.RUNNING))  # fmt: skip
    if unfinished.exists():
        return None
    return search_retry_at(study_id)
