"""The documents list, a document's page with its episodes, episode splitting, and the import upload."""

from __future__ import annotations

import json
import unicodedata
from urllib.parse import quote

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.views.decorators.http import require_GET, require_POST

from annotate.coding.visibility import coding_visibility
from annotate.documents.selectors import DocumentFilters, document_labels, documents_page
from annotate.documents.services import episode_delete, episode_excerpt_create, episode_split_set
from annotate.imports.uploads import import_upload_start, upload_max_bytes
from annotate.models import Document, DocumentKind, Episode, Role, Split, Study
from annotate.views.access import study_view

BODY_DISPLAY_LIMIT = 100_000


def _chars(text: str, length: int) -> str:
    """`Truncator(text).chars(length)`, without its per-character walk for the text that is already short
    and in NFC (nearly every title and repository): the same string either way (a test compares them)."""
    if len(text) <= length and (text.isascii() or unicodedata.is_normalized("NFC", text)):
        return text
    return Truncator(text).chars(length)


def _document_rows(study: Study, page) -> SafeString:
    """The table rows of a page of documents, built here rather than by the template engine, which spent
    about as long on these 50 rows as the search itself (a `{% url %}` and a dozen nodes a row).
    Every value from a document is escaped by format_html; the snippet is already escaped HTML."""
    detail = reverse("document_detail", args=[study.slug, 0])[: -len("0/")]  # ".../documents/"
    kinds = {kind: str(label) for kind, label in DocumentKind.choices}  # lazy labels, translated once a page
    rows = []
    for doc in page.rows:
        stats = page.episodes.get(doc.pk, {})
        snippet = page.snippets.get(doc.pk, "")
        labels = format_html_join(
            " ", '<a class="badge" href="?label={}">{}</a>', ((quote(x), x) for x in document_labels(doc))
        )
        episodes = format_html("{}", stats.get("n") or 0)
        if stats.get("coded"):
            episodes += format_html(' · <span class="badge ok">{} coded</span>', stats["coded"])
        if stats.get("holdout"):
            episodes += format_html(' · <span class="badge warn">{} hold-out</span>', stats["holdout"])
        row = format_html(
            '<tr><td><a href="{}{}/">{}</a><br><span class="muted small">{}</span>{}</td><td>{}</td>'
            '<td><a href="?cluster={}">{}</a></td><td>{}{}</td><td>{}</td></tr>',
            detail, doc.pk, _chars(doc.title, 120), doc.external_id,
            format_html('<br><span class="snippet small">{}</span>', snippet) if snippet else "",
            kinds.get(doc.kind, doc.kind), quote(doc.cluster), _chars(doc.cluster, 40),
            labels, " " if labels else "", episodes,
        )  # fmt: skip
        rows.append(row)
    return mark_safe("\n".join(rows))  # noqa: S308 - each row is format_html's


@require_GET
@study_view("read")
def document_list(request: HttpRequest, study: Study) -> HttpResponse:
    filters = DocumentFilters.from_query(request.GET)
    visible = coding_visibility(request.membership).episodes_q()
    page = documents_page(
        study, filters, after=request.GET.get("after"), before=request.GET.get("before"), visible=visible
    )
    context = {
        "study": study, "page": page, "filters": filters, "query": filters.as_query(),
        "kinds": DocumentKind.choices, "splits": Split.choices, "rows": _document_rows(study, page),
    }  # fmt: skip
    template = "annotate/partials/_documents.html" if request.htmx else "annotate/documents.html"
    return render(request, template, context)


def _meta_rows(meta: dict) -> list[tuple[str, str]]:
    def show(value) -> str:
        if isinstance(value, list):
            return "; ".join(str(v) for v in value)
        return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)

    return [(key.replace("_", " "), show(value)) for key, value in sorted(meta.items())]


def _episodes_context(request: HttpRequest, study: Study, document: Document, **extra) -> dict:
    episodes = list(Episode.objects.filter(document=document).order_by("order", "pk"))
    is_owner = request.membership.role == Role.OWNER
    show_progress = coding_visibility(request.membership).sees_progress
    context = {"study": study, "document": document, "episodes": episodes, "is_owner": is_owner}
    return {**context, "show_progress": show_progress, **extra}


@require_GET
@study_view("read")
def document_detail(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    document = get_object_or_404(Document, pk=pk, study=study)
    shown = document.body[:BODY_DISPLAY_LIMIT]
    context = _episodes_context(
        request, study, document, body_shown=shown, body_truncated=len(document.body) > len(shown),
        labels=document_labels(document), meta=_meta_rows(document.meta),
    )  # fmt: skip
    return render(request, "annotate/document.html", context)


def _episodes_response(request: HttpRequest, study: Study, document: Document, error: str = "") -> HttpResponse:
    if request.htmx:
        context = _episodes_context(request, study, document, error=error)
        return render(request, "annotate/partials/_episodes.html", context)
    if error:
        messages.error(request, error)
    return redirect("document_detail", slug=study.slug, pk=document.pk)


@require_POST
@study_view("owner")
def document_episode_add(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Split: add an episode from the owner's text selection (offsets into the body)."""
    document = get_object_or_404(Document, pk=pk, study=study)
    try:
        episode_excerpt_create(document=document, start=int(request.POST.get("start", "")),
                               end=int(request.POST.get("end", "")), text=request.POST.get("text"))  # fmt: skip
    except ValueError:
        return _episodes_response(request, study, document, "Select some text first.")
    except ValidationError as exc:
        return _episodes_response(request, study, document, " ".join(exc.messages))
    return _episodes_response(request, study, document)


@require_POST
@study_view("owner")
def document_episode_split(request: HttpRequest, study: Study, pk: int, episode_pk: int) -> HttpResponse:
    episode = get_object_or_404(Episode.objects.select_related("document"), pk=episode_pk, document_id=pk, study=study)
    try:
        episode_split_set(episode=episode, split=request.POST.get("split", ""))
    except ValidationError as exc:
        return _episodes_response(request, study, episode.document, " ".join(exc.messages))
    return _episodes_response(request, study, episode.document)


@require_POST
@study_view("owner")
def document_episode_delete(request: HttpRequest, study: Study, pk: int, episode_pk: int) -> HttpResponse:
    episode = get_object_or_404(Episode.objects.select_related("document"), pk=episode_pk, document_id=pk, study=study)
    try:
        episode_delete(episode=episode)
    except ValidationError as exc:
        return _episodes_response(request, study, episode.document, " ".join(exc.messages))
    return _episodes_response(request, study, episode.document)


@require_POST
@study_view("owner")
def study_import(request: HttpRequest, study: Study) -> HttpResponse:
    """Upload a file to import; the import runs as a Job whose progress the fragment polls."""
    context = {"study": study, "max_upload_mb": settings.FAULTLINE_MAX_UPLOAD_MB, "max_bytes": upload_max_bytes()}
    try:
        job = import_upload_start(study=study, user=request.user, uploaded_file=request.FILES.get("file"),
                                  include_prs=request.POST.get("include_prs") == "on")  # fmt: skip
    except ValidationError as exc:
        context["error"] = " ".join(exc.messages)
        if request.htmx:  # htmx swaps only 2xx answers; the fragment carries the error
            return render(request, "annotate/partials/_import.html", context)
        return render(request, "annotate/import_error.html", context, status=400)
    if request.htmx:
        job.refresh_from_db()  # an eager (broker-less) run has already finished it
        return render(request, "annotate/partials/_import.html", {**context, "job": job})
    return redirect("job_status", pk=job.pk)
