"""Reads for the coding workspace: the codebook picker, blinding, progress, disagreements and history.

Every function here costs a fixed number of queries, whatever the size of the study.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, time

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from annotate.coding.labels import disagreeing_axes, resolve_label
from annotate.coding.visibility import coding_visibility
from annotate.models import Adjudication, Coding, Episode, EpisodeStatus, Lease, Membership, Role, Study
from taxonomy.models import Axis, AxisValue, Codebook, FailureType

# ---------------------------------------------------------------- codebook picker


@dataclass(frozen=True)
class Picker:
    """A codebook prepared for the coding and adjudication forms."""

    codebook_id: int
    types: list[FailureType]
    categories: list[tuple[str, str, list[FailureType]]]  # (code, name, types) in codebook order
    type_by_code: dict[str, FailureType]
    type_by_id: dict[int, FailureType]
    axes: dict[str, list[AxisValue]]
    value_by_code: dict[str, dict[str, AxisValue]]
    value_by_id: dict[int, AxisValue]
    data_json: str  # the type picker's data, served once per codebook version as a cached script (codebook_data_js)
    stamp: str  # the codebook version's cache key in that script's URL ("draft" until published)
    options_html: str  # the <optgroup>/<option> list of types, escaped, rendered once per codebook

    def type_options(self, selected: str | None = "") -> SafeString:
        """The type <option>s with `selected` marked; the page's biggest loop, so it is prebuilt."""
        html = self.options_html
        if selected and selected in self.type_by_code:
            tag = f'<option value="{escape(selected)}">'
            html = html.replace(tag, tag[:-1] + " selected>", 1)
        return mark_safe(html)  # noqa: S308 - every value was escaped when the list was built

    @property
    def groups(self) -> list[tuple[str, str, list[AxisValue]]]:
        """(axis, label, values) for source, stage and capability."""
        return [(axis, Axis(axis).label, self.axes[axis]) for axis in Axis.values]

    def attach(self, *rows) -> None:
        """Fill the code foreign keys of codings/adjudications from the picker, so templates make no queries."""
        for row in rows:
            if row is None:
                continue
            row.failure_type = self.type_by_id.get(row.failure_type_id) if row.failure_type_id else None
            for axis in Axis.values:
                value_id = getattr(row, f"{axis}_id")
                setattr(row, axis, self.value_by_id.get(value_id) if value_id else None)

    def axis_code(self, obj_id: int | None) -> str:
        """The code of an axis value id ("" for none), for forms and history."""
        if obj_id is None:
            return ""
        value = self.value_by_id.get(obj_id)
        return value.code if value is not None else ""

    def type_code(self, type_id: int | None) -> str:
        t = self.type_by_id.get(type_id) if type_id else None
        return t.code if t else ""

    def type_label(self, type_id: int | None) -> str:
        """ "TUS-03 Incorrect tool arguments": a code never stands alone on a page."""
        t = self.type_by_id.get(type_id) if type_id else None
        return f"{t.code} {t.name}" if t else ""

    def axis_label(self, obj_id: int | None) -> str:
        """The display name of an axis value id ("Iterative execution", not "iterative_execution")."""
        value = self.value_by_id.get(obj_id) if obj_id is not None else None
        return value.name if value is not None else ""


_picker_cache: OrderedDict[tuple, Picker] = OrderedDict()
_picker_lock = threading.Lock()


def _picker_build(codebook: Codebook) -> Picker:
    types = list(FailureType.objects.filter(codebook=codebook).select_related("category").order_by("order"))
    axes: dict[str, list[AxisValue]] = {axis: [] for axis in Axis.values}
    for value in AxisValue.objects.filter(codebook=codebook).order_by("axis", "order"):
        axes[value.axis].append(value)
    groups: OrderedDict[int, tuple[str, str, list[FailureType]]] = OrderedDict()
    for t in sorted(types, key=lambda t: (t.category.order, t.order)):
        groups.setdefault(t.category_id, (t.category.code, t.category.name, []))[2].append(t)
    data = {
        "types": [
            {
                "code": t.code,
                "name": t.name,
                "category": f"{t.category.code} {t.category.name}",
                "definition": t.definition,
                "indicators": t.indicators,
                "example": t.example,
                "source": t.typical_source,
                "stage": (t.typical_stages or [""])[0],
                "capability": (t.typical_capabilities or [""])[0],
            }
            for t in types
        ],
        "axes": {axis: {v.code: v.name for v in values} for axis, values in axes.items()},
    }
    options = []
    for code, name, members in groups.values():
        options.append(f'<optgroup label="{escape(code)} {escape(name)}">')
        options += [f'<option value="{escape(t.code)}">{escape(t.code)} {escape(t.name)}</option>' for t in members]
        options.append("</optgroup>")
    return Picker(
        codebook_id=codebook.pk,
        types=types,
        categories=list(groups.values()),
        type_by_code={t.code: t for t in types},
        type_by_id={t.pk: t for t in types},
        axes=axes,
        value_by_code={axis: {v.code: v for v in values} for axis, values in axes.items()},
        value_by_id={v.pk: v for values in axes.values() for v in values},
        data_json=json.dumps(data, ensure_ascii=False, separators=(",", ":")),
        stamp=f"{codebook.published_at:%Y%m%d%H%M%S%f}" if codebook.is_published else "draft",
        options_html="".join(options),
    )


def codebook_picker(codebook: Codebook) -> Picker:
    """The codebook's types and axis values; cached per process once the codebook is published (immutable)."""
    if not codebook.is_published:
        return _picker_build(codebook)
    key = (codebook.pk, codebook.published_at)
    with _picker_lock:
        picker = _picker_cache.get(key)
    if picker is None:
        picker = _picker_build(codebook)
        with _picker_lock:
            _picker_cache[key] = picker
            while len(_picker_cache) > 16:
                _picker_cache.popitem(last=False)
    return picker


# ---------------------------------------------------------------- codings


def episode_codings(episode: Episode) -> list[Coding]:
    """All codings of an episode with their coders, in coder order."""
    return list(Coding.objects.filter(episode=episode).select_related("coder").order_by("coder__username"))


# ---------------------------------------------------------------- progress


@dataclass(frozen=True)
class CoderProgress:
    username: str
    role: str
    today: int
    total: int


@dataclass(frozen=True)
class Progress:
    k: int
    coders: list[CoderProgress]  # everyone's (owners, viewers) or only the coder's own
    mine: CoderProgress | None
    buckets: list[tuple[str, int]]  # ("0", n), ("1", n), ..., ("k", n) where the last means k or more
    episodes: int

    @property
    def max_bucket(self) -> int:
        return max([n for _, n in self.buckets] + [1])


def study_progress(study: Study, membership: Membership) -> Progress:
    """Per-coder counts (today, in the server's time zone, and in total) and episodes by number of codings."""
    start = timezone.make_aware(datetime.combine(timezone.localdate(), time.min))
    rows = (
        Coding.objects.filter(episode__study=study)
        .values("coder_id")
        .annotate(total=Count("pk"), today=Count("pk", filter=Q(created_at__gte=start)))
        .order_by()
    )
    counts = {r["coder_id"]: (r["today"], r["total"]) for r in rows}
    members = study.memberships.select_related("user").order_by("user__username")
    coders = [
        CoderProgress(m.user.get_username(), m.role, *counts.get(m.user_id, (0, 0)))
        for m in members
        if m.role != Role.VIEWER or m.user_id in counts
    ]
    mine = next((c for c in coders if c.username == membership.user.get_username()), None)
    if membership.role == Role.CODER:
        coders = [mine] if mine else []
    k = study.coders_per_episode
    per_n = dict(
        Episode.objects.filter(study=study).values("n_codings").annotate(n=Count("pk")).values_list("n_codings", "n")
    )
    buckets = [(str(n), per_n.get(n, 0)) for n in range(k)]
    buckets.append((f"{k}+" if any(n > k for n in per_n) else str(k), sum(c for n, c in per_n.items() if n >= k)))
    if not coding_visibility(membership).sees_progress:
        buckets = []  # how far everyone else has got is others' codings: a blind coder sees only their own
    return Progress(k=k, coders=coders, mine=mine, buckets=buckets, episodes=sum(per_n.values()))


@dataclass(frozen=True)
class QueueLeft:
    left: int  # episodes this coder could still be given: queued splits, below k, not adjudicated, not theirs
    total: int  # episodes in the study's queued splits


def coder_queue_left(study: Study, user) -> QueueLeft:
    """How much of the study's queue is left for `user`, in one aggregate query.

    Other coders' live leases are not subtracted: a leased episode may come back
    to this coder when the lease ends, so it is still "left" for them.
    """
    mine = Coding.objects.filter(episode=OuterRef("pk"), coder=user)
    row = (
        Episode.objects.filter(study=study, split__in=study.splits_in_queue)
        .annotate(mine=Exists(mine))
        .aggregate(
            total=Count("pk"),
            left=Count(
                "pk",
                filter=Q(n_codings__lt=study.coders_per_episode, mine=False) & ~Q(status=EpisodeStatus.ADJUDICATED),
            ),
        )
    )
    return QueueLeft(left=row["left"], total=row["total"])


def coded_since(study: Study, user, since) -> int:
    """Episodes of the study `user` saved a coding of since `since` (their login: "coded this session")."""
    qs = Coding.objects.filter(episode__study=study, coder=user)
    return (qs.filter(updated_at__gte=since) if since else qs).count()


def live_leases(study: Study, membership: Membership, *, episode: Episode | None = None, limit: int = 200):
    """Leases held now, soonest to expire first: every coder's for an owner, only their own for anyone else.

    A lease keeps an episode's place while a coder works on it (it counts towards k), so an
    owner who wonders why an episode left the queue can see who holds it and until when.
    """
    qs = Lease.objects.filter(episode__study=study, expires_at__gt=timezone.now()).select_related("coder", "episode")
    if membership.role != Role.OWNER:
        qs = qs.filter(coder=membership.user)
    if episode is not None:
        qs = qs.filter(episode=episode)
    return list(qs.order_by("expires_at", "pk")[:limit])


# ---------------------------------------------------------------- disagreements

DISAGREEMENT_AXES = ("failure_type", "source", "stage", "capability", "not_a_failure", "needs_new_type")
AXIS_LABELS = {
    "failure_type": "Failure type",
    "source": "Source",
    "stage": "Stage",
    "capability": "Capability",
    "not_a_failure": "Not a failure",
    "needs_new_type": "Needs a new type",
}


def disagreeing_episodes(
    study: Study, *, axis: str = "", failure_type_id: int | None = None, adjudicated: bool = False
) -> QuerySet[Episode]:
    """Complete episodes whose coders differ (on `axis`, or on any axis), in id order, lazily.

    An index lookup: the coding services store each episode's disagreement as axis
    bits (services/disagreement.py), and a partial index holds only the episodes
    that disagree, so a page costs the same however many agreeing episodes there are.
    """
    from annotate.coding.disagreement import DISAGREEMENT_BITS

    status = EpisodeStatus.ADJUDICATED if adjudicated else EpisodeStatus.CODED
    episodes = Episode.objects.filter(study=study, status=status, disagreement__gt=0)
    if axis:
        episodes = episodes.annotate(on_axis=F("disagreement").bitand(DISAGREEMENT_BITS[axis])).filter(on_axis__gt=0)
    if failure_type_id is not None:
        episodes = episodes.filter(
            Exists(Coding.objects.filter(episode=OuterRef("pk"), failure_type_id=failure_type_id))
        )
    return episodes.order_by("pk")


@dataclass
class DisagreementRow:
    episode: Episode
    codings: list[Coding]
    axes: list[str]
    label_status: str
    adjudication: Adjudication | None = None
    values: dict[str, list[str]] = field(default_factory=dict)
    coders: str = ""


def disagreement_page(
    study: Study,
    picker: Picker,
    *,
    axis: str = "",
    failure_type_id: int | None = None,
    adjudicated: bool = False,
    after: int = 0,
    limit: int = 25,
) -> tuple[list[DisagreementRow], int | None]:
    """One page of episodes to adjudicate (keyset-paginated by episode id) and the cursor of the next page.

    Four queries per page: the episode ids, the episodes, their codings, their adjudications.
    """
    ids = list(
        disagreeing_episodes(study, axis=axis, failure_type_id=failure_type_id, adjudicated=adjudicated)
        .filter(pk__gt=after)
        .values_list("pk", flat=True)[: limit + 1]
    )
    next_after = ids[limit - 1] if len(ids) > limit else None
    ids = ids[:limit]
    # Only the columns the list shows: a page of bodies and memos would cost more than the query.
    episodes = (
        Episode.objects.filter(pk__in=ids)
        .select_related("document")
        .only("study_id", "document_id", "n_codings", "status", "document__title", "document__cluster")
        .order_by("pk")
    )
    codings: dict[int, list[Coding]] = {}
    fields = ("episode_id", "coder__username", "failure_type", "source", "stage", "capability", "not_a_failure")
    for c in (
        Coding.objects.filter(episode_id__in=ids)
        .select_related("coder")
        .only(*fields, "needs_new_type", "recode_from")
        .order_by("coder__username")
    ):
        codings.setdefault(c.episode_id, []).append(c)
    adjudicated = Adjudication.objects.filter(episode_id__in=ids).only("episode_id", "recode_from")
    adjudications = {a.episode_id: a for a in adjudicated} if ids else {}
    rows = []
    for ep in episodes:
        mine = codings.get(ep.pk, [])
        label = resolve_label(adjudication=adjudications.get(ep.pk), codings=mine, k=study.coders_per_episode)
        axes = [AXIS_LABELS.get(a, a) for a in disagreeing_axes(mine)]
        row = DisagreementRow(ep, mine, axes, label.status, adjudications.get(ep.pk))
        row.values = {a: [coding_label(c, a, picker) for c in mine] for a in ("failure_type", *Axis.values)}
        row.coders = ", ".join(c.coder.get_username() for c in mine)
        rows.append(row)
    return rows, next_after


def coding_code(row, axis: str, picker: Picker) -> str:
    """The code a coding (or adjudication, or history record) has on one axis, for display."""
    if axis == "failure_type":
        if row.not_a_failure:
            return "not a failure"
        return picker.type_code(row.failure_type_id) or ("new type" if row.needs_new_type else "")
    if axis in ("source", "stage", "capability"):
        return picker.axis_code(getattr(row, f"{axis}_id"))
    return "yes" if getattr(row, axis) else "no"


def coding_label(row, axis: str, picker: Picker) -> str:
    """What a coding (or adjudication) has on one axis, as a reader sees it: display names, not codes."""
    if axis == "failure_type":
        if row.not_a_failure:
            return "not a failure"
        return picker.type_label(row.failure_type_id) or ("needs a new type" if row.needs_new_type else "")
    if axis in Axis.values:
        return picker.axis_label(getattr(row, f"{axis}_id"))
    return "yes" if getattr(row, axis) else "no"


# ---------------------------------------------------------------- history

HISTORY_FIELDS = [
    ("failure_type", "Failure type"),
    ("source", "Source"),
    ("stage", "Stage"),
    ("capability", "Capability"),
    ("not_a_failure", "Not a failure"),
    ("not_a_failure_reason", "Reason"),
    ("needs_new_type", "Needs a new type"),
    ("confidence", "Confidence"),
    ("memo", "Memo"),
    ("evidence", "Evidence"),
    ("evidence_span", "Evidence offsets"),
    ("from_suggestion", "From suggestion"),
    ("decisive_step", "Decisive step"),
    ("responsible_agent", "Responsible agent"),
    ("rationale", "Rationale"),
]
ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}


@dataclass(frozen=True)
class HistoryRow:
    when: datetime
    who: str
    subject: str  # "bob's coding" or "adjudication"
    action: str
    changes: list[tuple[str, str, str]]  # (field, before, after)


def _history_value(record, name: str, picker: Picker) -> str:
    if name in ("failure_type", "source", "stage", "capability"):
        obj_id = getattr(record, f"{name}_id", None)
        return picker.type_label(obj_id) if name == "failure_type" else picker.axis_label(obj_id)
    if name == "evidence_span":
        start, end = getattr(record, "evidence_start", None), getattr(record, "evidence_end", None)
        return "" if start is None else f"{start}-{end}"
    if name == "from_suggestion":
        value = getattr(record, "from_suggestion_id", None)
        return f"#{value}" if value else ""
    if not hasattr(record, name):
        return ""
    value = getattr(record, name)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value or "")


def _history_rows(records, picker: Picker, subject) -> list[HistoryRow]:
    rows = []
    previous: dict[int, object] = {}
    for rec in records:
        before = previous.get(rec.id)
        changes = []
        for name, label in HISTORY_FIELDS:
            old = _history_value(before, name, picker) if before is not None else ""
            new = _history_value(rec, name, picker) if rec.history_type != "-" else ""
            if rec.history_type == "-":
                old = _history_value(rec, name, picker)
            if rec.history_type != "~" and (old or new) in ("no", "medium"):
                continue  # a created or deleted row lists what was set, not every default
            if old != new:
                changes.append((label, old, new))
        who = rec.history_user.get_username() if rec.history_user else "system"
        rows.append(HistoryRow(rec.history_date, who, subject(rec), ACTIONS.get(rec.history_type, "?"), changes))
        previous[rec.id] = rec
    return rows


def episode_history(episode: Episode, picker: Picker) -> list[HistoryRow]:
    """Every create, change and delete of the episode's codings and adjudication, oldest first, with diffs."""
    codings = list(
        Coding.history.filter(episode_id=episode.pk).select_related("history_user", "coder").order_by("history_id")
    )
    adjudications = list(
        Adjudication.history.filter(episode_id=episode.pk).select_related("history_user").order_by("history_id")
    )
    rows = _history_rows(codings, picker, lambda r: f"{r.coder.get_username()}'s coding")
    rows += _history_rows(adjudications, picker, lambda r: "adjudication")
    return sorted(rows, key=lambda r: r.when)


def side_by_side(codings: list[Coding], picker: Picker) -> list[tuple[str, bool, list[str]]]:
    """Rows (label, coders differ, one cell per coding) for the adjudication page."""
    differ = set(disagreeing_axes(codings))

    def type_cell(c: Coding) -> str:
        t = picker.type_by_id.get(c.failure_type_id) if c.failure_type_id else None
        return f"{t.code} {t.name}" if t else "—"

    def axis_cell(c: Coding, axis: str) -> str:
        value = picker.value_by_id.get(getattr(c, f"{axis}_id") or 0)
        return value.name if value else "—"

    rows = [("Failure type", "failure_type" in differ, [type_cell(c) for c in codings])]
    for axis in ("source", "stage", "capability"):
        rows.append((Axis(axis).label, axis in differ, [axis_cell(c, axis) for c in codings]))
    rows.append(("Not a failure", "not_a_failure" in differ, ["yes" if c.not_a_failure else "no" for c in codings]))
    rows.append(
        ("Needs a new type", "needs_new_type" in differ, ["yes" if c.needs_new_type else "no" for c in codings])
    )
    # Confidence is no axis of agreement: the badge says "same" or nothing, never "= agree" for High vs Medium.
    same_confidence = len({c.confidence for c in codings}) <= 1
    rows.append(("Confidence", False if same_confidence else None, [c.get_confidence_display() for c in codings]))
    if any(c.decisive_step is not None or c.responsible_agent for c in codings):
        steps = ["—" if c.decisive_step is None else f"#{c.decisive_step}" for c in codings]
        agents = [c.responsible_agent or "—" for c in codings]
        rows.append(("Decisive step", len(set(steps)) > 1, steps))
        rows.append(("Responsible agent", len({a.strip().lower() for a in agents}) > 1, agents))
    return rows
