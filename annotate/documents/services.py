"""Writes on a document's episodes: split a document into excerpts, set an episode's split, delete one.

An excerpt episode stores its text and its [start, end) character offsets into
Document.body, so evidence and exports can point back into the original.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from annotate.models import Document, Episode, Split
from annotate.studies.services import queue_key_for, study_data_changed


def _locate(body: str, start: int, end: int, text: str | None) -> tuple[int, int]:
    """Offsets of the selection, trusting `text` over the offsets if they disagree."""
    if text is not None and body[start:end] != text:
        hits = []
        at = body.find(text)
        while at != -1 and len(hits) < 1000:
            hits.append(at)
            at = body.find(text, at + 1)
        if not text or not hits:
            raise ValidationError({"excerpt": "The selected text is not in this document's body."})
        start = min(hits, key=lambda hit: abs(hit - start))
        end = start + len(text)
    # Trim surrounding whitespace so two selections of the same sentence are the same excerpt.
    while start < end and body[start].isspace():
        start += 1
    while end > start and body[end - 1].isspace():
        end -= 1
    return start, end


@transaction.atomic
def episode_excerpt_create(*, document: Document, start: int, end: int, text: str | None = None) -> Episode:
    """Add an episode for body[start:end] of `document`.

    `text` is the selection as the browser saw it; if the offsets do not match
    it, the nearest occurrence of the text is used. Raises ValidationError for
    an empty, out-of-range or duplicate excerpt.
    """
    body = document.body
    if not (0 <= start < end <= len(body)):
        raise ValidationError({"excerpt": f"Select some text: offsets must satisfy 0 ≤ start < end ≤ {len(body)}."})
    start, end = _locate(body, start, end, text)
    if start >= end:
        raise ValidationError({"excerpt": "The selection is only whitespace."})
    # Lock the document so two owners splitting at once get distinct `order`s.
    Document.objects.select_for_update().filter(pk=document.pk).first()
    if Episode.objects.filter(document=document, start=start, end=end).exists():
        raise ValidationError({"excerpt": "An episode with exactly this excerpt already exists."})
    order = (Episode.objects.filter(document=document).aggregate(m=Max("order"))["m"] or 0) + 1
    episode = Episode.objects.create(
        document=document, study_id=document.study_id, excerpt=body[start:end], start=start, end=end, order=order
    )
    episode.queue_key = queue_key_for(document.study, episode.pk)
    episode.save(update_fields=["queue_key"])
    study_data_changed(study_id=document.study_id)
    return episode


@transaction.atomic
def episode_split_set(*, episode: Episode, split: str) -> Episode:
    """Put an episode in the primary set or the hold-out set."""
    if split not in Split.values:
        raise ValidationError({"split": f"Split must be one of {', '.join(Split.values)}."})
    if episode.split != split:
        episode.split = split
        episode.save(update_fields=["split"])
        study_data_changed(study_id=episode.study_id)
    return episode


@transaction.atomic
def episode_delete(*, episode: Episode) -> None:
    """Delete an episode nobody has coded or adjudicated; a document keeps at least one."""
    locked = Episode.objects.select_for_update().get(pk=episode.pk)
    if locked.codings.exists() or hasattr(locked, "adjudication"):
        raise ValidationError({"episode": "This episode has codings; it cannot be deleted."})
    if not Episode.objects.filter(document_id=locked.document_id).exclude(pk=locked.pk).exists():
        raise ValidationError({"episode": "A document keeps at least one episode."})
    locked.delete()
    study_data_changed(study_id=locked.study_id)
