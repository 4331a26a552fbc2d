"""The coding queue: which episode a coder codes next, and the leases that keep overlap at k.

An episode may be worked on by at most k coders (`Study.coders_per_episode`):
its stored codings plus the live leases of coders who are coding it now. A
lease is a (episode, coder) row that expires after FAULTLINE_LEASE_MINUTES, so
an abandoned tab frees its place on its own.

Claims lock the episode row (`select_for_update`; with `skip_locked` where the
database has it, an episode another claim holds is passed over first and
waited for only if nothing else is free) and count the leases again once the
lock is held: under READ COMMITTED a statement's snapshot can predate a lease
that another transaction committed while we waited, so the count in the
claiming statement alone is not enough.

The queue serves episodes that already have codings first (so episodes reach k
and become usable for agreement and analysis), and within that in the study's
order: the stored random order (`Episode.queue_key`), import order (`id`), or
`uncertain`: the least confident suggestion first (active learning, see _in_order).
To keep a request O(1) in the study's size it only looks at a bounded window at
the head of each (split, number of codings) slice of the queue index; only when
every window is exhausted does it fall back to a full scan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotate.coding.services import has_room
from annotate.models import Coding, Episode, EpisodeStatus, Lease, QueueOrder, Study, Suggestion
from annotate.studies.selectors import count_per_outer_row

# How many episodes at the head of each queue slice one request examines (a small
# window first, which is almost always enough, then a wider one), and how many of
# the eligible ones it tries to lock before falling back.
WINDOWS = (40, 200)
CLAIM_ATTEMPTS = 10


def lease_expiry():
    return timezone.now() + timedelta(minutes=settings.FAULTLINE_LEASE_MINUTES)


def _order_field(study: Study) -> str:
    return {QueueOrder.IMPORT: "id", QueueOrder.UNCERTAIN: "certainty"}.get(study.queue_order, "queue_key")


def _in_order(qs: QuerySet[Episode], study: Study) -> tuple[QuerySet[Episode], tuple[str, ...]]:
    """The queryset ready to be ordered in the study's queue order, and the order_by fields.

    `uncertain` (active learning) serves first the episodes whose newest usable
    suggestion has the lowest top-1 confidence, in the random order among equals;
    episodes without one (or declined) come after every suggested episode. It sorts
    on a subquery, so unlike the stored orders it costs a scan of the open part of
    the queue per request.
    """
    if study.queue_order != QueueOrder.UNCERTAIN:
        return qs, (_order_field(study),)
    newest = (
        Suggestion.objects.filter(episode=OuterRef("pk"), error="", confidence__isnull=False)
        .order_by("-created_at", "-pk")
        .values("confidence")[:1]
    )
    return qs.annotate(certainty=Coalesce(Subquery(newest), Value(2.0))), ("certainty", "queue_key")


def _others_leases(coder, now):
    """Number of live leases on the outer episode held by coders other than `coder`."""
    live = Lease.objects.filter(episode=OuterRef("pk"), expires_at__gt=now).exclude(coder=coder)
    return count_per_outer_row(live, "episode")


def _open_for(study: Study, coder, now) -> QuerySet[Episode]:
    """Episodes of the study this coder may take now: not coded by them, with room below k."""
    k = study.coders_per_episode
    return (
        Episode.objects.filter(study=study, split__in=study.splits_in_queue, n_codings__lt=k)
        .exclude(status=EpisodeStatus.ADJUDICATED)
        .exclude(Exists(Coding.objects.filter(episode=OuterRef("pk"), coder=coder)))
        .annotate(others=_others_leases(coder, now))
        .filter(others__lt=Value(k) - F("n_codings"))
    )


def _lockable(qs: QuerySet[Episode]) -> QuerySet[Episode]:
    skip = connection.features.has_select_for_update_skip_locked
    return qs.select_for_update(skip_locked=skip, of=("self",) if connection.features.has_select_for_update_of else ())


def _window(study: Study, coder, now, skipped: set[int], size: int) -> list[int]:
    """Ids the coder may take at the head of each (split, n_codings) slice of the queue, best first.

    k x splits small index-range queries fetch the heads (one UNION ALL where the database
    allows LIMIT inside it); one more finds the coder's own codings and the other coders'
    live leases among them. The eligibility test runs here in Python on a few hundred rows;
    the claim re-checks it under the row lock.
    """
    heads = []
    for n in range(study.coders_per_episode):
        for split in study.splits_in_queue:
            qs, order = _in_order(
                Episode.objects.filter(study=study, split=split, n_codings=n).exclude(status=EpisodeStatus.ADJUDICATED),
                study,
            )
            heads.append(qs.order_by(*order).values_list("pk", "n_codings", order[0])[:size])
    if len(heads) > 1 and connection.features.supports_slicing_ordering_in_compound:
        rows: list[tuple[int, int, int]] = list(heads[0].union(*heads[1:], all=True))
    else:
        rows = [row for head in heads for row in head]
    if not rows:
        return []
    ids = [pk for pk, _, _ in rows]
    coded = Coding.objects.filter(coder=coder, episode_id__in=ids).values_list("episode_id", Value(0))
    others = (
        Lease.objects.filter(episode_id__in=ids, expires_at__gt=now)
        .exclude(coder=coder)
        .values_list("episode_id", Value(1))
    )
    marks = list(coded.union(others, all=True))
    mine = {pk for pk, kind in marks if kind == 0}
    leased = Counter(pk for pk, kind in marks if kind == 1)
    k = study.coders_per_episode
    eligible = [r for r in rows if r[0] not in mine and r[0] not in skipped and r[1] + leased[r[0]] < k]
    eligible.sort(key=lambda r: (-r[1], r[2]))
    return [pk for pk, _, _ in eligible]


def _lease_take(episode: Episode, coder) -> Lease:
    """Give `coder` the lease on `episode`, dropping their other leases in the study (one at a time).

    The caller holds the episode's row lock, so replacing the coder's lease cannot race.
    """
    mine = Lease.objects.filter(coder=coder)
    if connection.vendor == "postgresql":
        # One DELETE, planned from the coder's index.
        mine.filter(episode__study_id=episode.study_id).delete()
    else:
        # The coder's leases are few: find them by the coder index and filter in Python. A join on the
        # study lets SQLite's planner walk the study's episodes instead, which grows with the study.
        stale = [pk for pk, study_id in mine.values_list("pk", "episode__study_id") if study_id == episode.study_id]
        if stale:
            Lease.objects.filter(pk__in=stale).delete()
    return Lease.objects.create(episode=episode, coder=coder, expires_at=lease_expiry())


class _NoRoom(Exception):
    """Raised inside a claim's savepoint so that rolling it back releases the row lock."""


_LOCKED = object()  # another transaction is claiming this episode right now


def _claim_one(pk: int, study: Study, coder, now, *, wait: bool):
    """Lock one episode and lease it if it still has room: the Episode, None, or _LOCKED.

    Each attempt runs in a savepoint that is rolled back when the episode has no room, so
    a claim never holds a lock it does not use while it waits for another: no deadlocks.
    """
    try:
        with transaction.atomic():
            rows = Episode.objects.filter(pk=pk)
            episode = (rows.select_for_update() if wait else _lockable(rows)).first()
            if episode is None:
                return _LOCKED  # skipped by SKIP LOCKED (or deleted meanwhile)
            episode.study = study
            if episode.status == EpisodeStatus.ADJUDICATED or not has_room(episode, coder, now):
                raise _NoRoom
            _lease_take(episode, coder)
            return episode
    except _NoRoom:
        return None


def _claim_first(pks: list[int], study: Study, coder, now) -> Episode | None:
    """Claim the first of `pks` that has room. Episodes other claims hold are passed over, then
    waited for in turn, so a coder is never told "nothing left" only because of a momentary lock."""
    locked = []
    for pk in pks:
        result = _claim_one(pk, study, coder, now, wait=False)
        if result is _LOCKED:
            locked.append(pk)
        elif result is not None:
            return result
    for pk in locked:
        result = _claim_one(pk, study, coder, now, wait=True)
        if result is not None and result is not _LOCKED:
            return result
    return None


def _scan(candidates: QuerySet[Episode], study: Study) -> list[int]:
    """The fallback: the first candidates of the whole open part of the study (once the windows run dry)."""
    qs, order = _in_order(candidates, study)
    return list(qs.order_by("-n_codings", *order).values_list("pk", flat=True)[:CLAIM_ATTEMPTS])


def _held(study: Study, coder, now) -> Lease | None:
    return (
        Lease.objects.filter(coder=coder, episode__study=study, expires_at__gt=now)
        .exclude(episode__codings__coder=coder)
        .select_related("episode")
        .order_by("-expires_at")
        .first()
    )


def lease_held(*, study: Study, coder) -> Episode | None:
    """The episode `coder` holds a live lease on in this study (not yet coded by them), if any. Reads only."""
    held = _held(study, coder, timezone.now())
    return held.episode if held is not None else None


def _recode_for(study: Study, coder, skipped: set[int]) -> Episode | None:
    """The coder's first coding that a codebook migration queued again (its type split or retired),
    unless the episode was adjudicated meanwhile (the adjudicator decides then). Their own coding:
    no lease, no room to claim. No query in a study without such codings (Study.recoding)."""
    if not study.recoding:
        return None
    pending = (
        Coding.objects.filter(coder=coder, recode_from__isnull=False, episode__study=study)
        .exclude(episode__status=EpisodeStatus.ADJUDICATED)
        .exclude(episode_id__in=skipped)
        .select_related("episode")
        .order_by("episode_id")
        .first()
    )
    if pending is None:
        left = Coding.objects.filter(episode__study=study, recode_from__isnull=False)
        if not left.exclude(episode__status=EpisodeStatus.ADJUDICATED).exists():
            Study.objects.filter(pk=study.pk).update(recoding=False)  # all coded again: stop looking
        return None
    pending.episode.study = study
    return pending.episode


def episode_next(*, study: Study, coder, skipped: Iterable[int] = (), resume: bool = True) -> Episode | None:
    """Claim the next episode for `coder` and return it, or None when nothing is left for them.

    A coder whose codings a codebook migration queued again gets those first (_recode_for).
    A coder who already holds a live lease in this study gets that episode back,
    so reloading "next" never hands out a second episode. `resume=False` skips that
    lookup where the caller knows the coder holds none (their first coding of an
    episode has just ended its lease, and a claim leaves one lease per coder and
    study); a lease left anyway is dropped by the claim. `skipped` are episode
    ids the coder skipped recently: they are served again only once nothing
    else is left.

    It runs in autocommit, not in one transaction: each claim is its own short
    transaction (holding the episode's row lock), and everything before a claim
    only proposes candidates that the claim checks again.
    """
    now = timezone.now()
    held = _held(study, coder, now) if resume else None
    if held is not None:
        Lease.objects.filter(pk=held.pk).update(expires_at=lease_expiry())
        held.episode.study = study
        return held.episode
    skipped = set(skipped)
    recode = _recode_for(study, coder, skipped)
    if recode is not None:
        return recode
    episode = None
    for size in WINDOWS:
        episode = _claim_first(_window(study, coder, now, skipped, size)[:CLAIM_ATTEMPTS], study, coder, now)
        if episode is not None:
            break
    if episode is None:
        base = _open_for(study, coder, now)
        episode = _claim_first(_scan(base.exclude(pk__in=skipped), study), study, coder, now)
        if episode is None and skipped:
            episode = _claim_first(_scan(base, study), study, coder, now) or _recode_for(study, coder, set())
    return episode


def lease_claim(*, episode: Episode, coder) -> bool:
    """Take (or renew) `coder`'s lease on this one episode if it has room; True if they hold it.

    Used when a coder opens an episode directly rather than through the queue.
    A coder who already coded the episode needs no lease to edit their coding.
    """
    now = timezone.now()
    # Arriving from "next", the coder already holds a live lease here: renewing it is one
    # statement and needs no lock, because a live lease is already counted in the k places.
    mine = Lease.objects.filter(episode=episode, coder=coder, expires_at__gt=now)
    if episode.status != EpisodeStatus.ADJUDICATED and mine.update(expires_at=lease_expiry()):
        return True
    return _lease_claim_locked(episode, coder, now)


@transaction.atomic
def _lease_claim_locked(episode: Episode, coder, now) -> bool:
    locked = Episode.objects.select_for_update().select_related("study").get(pk=episode.pk)
    if locked.status == EpisodeStatus.ADJUDICATED:
        return False
    if not has_room(locked, coder, now):
        return False
    _lease_take(locked, coder)
    return True


def lease_room(*, episode: Episode, coder, leased: bool | None = None) -> bool:
    """Whether `coder` could start coding `episode` now: their live lease, or a free place. Reads only.

    Pages answer GETs with this; the place is claimed by "next" or by a POST (the first
    interaction with the form, or the save itself). `leased`: whether the coder holds a live
    lease on it, if the caller read that with the episode (see live_lease_of); None looks it up.
    """
    if episode.status == EpisodeStatus.ADJUDICATED:
        return False
    now = timezone.now()
    if leased is None:
        leased = Lease.objects.filter(episode=episode, coder=coder, expires_at__gt=now).exists()
    return leased or has_room(episode, coder, now)


def live_lease_of(coder, *, now: datetime | None = None) -> Exists:
    """An expression for an Episode row: whether `coder` (a user or their id) holds a lease live at `now`."""
    return Exists(Lease.objects.filter(episode=OuterRef("pk"), coder=coder, expires_at__gt=now or timezone.now()))


def lease_release(*, episode: Episode, coder) -> int:
    """Give the episode back (Skip, Back). Returns the number of leases removed."""
    deleted, _ = Lease.objects.filter(episode=episode, coder=coder).delete()
    return deleted


def lease_end(*, study: Study, lease_id: int) -> Lease:
    """An owner ends someone's lease, so the episode returns to the queue at once; their coding, if any, stays."""
    lease = Lease.objects.select_related("coder", "episode").get(pk=lease_id, episode__study=study)
    lease.delete()
    return lease
