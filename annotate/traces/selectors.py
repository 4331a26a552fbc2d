"""Reads for the trace viewer: a window of steps at a time, whatever the trace's length.

A window costs two queries (its steps with previews of their text, and their artifacts), so a
5,000-step trace serves its first screen as fast as a 50-step one. The trace's summary (step
count, agents, time span) was stored on the document at import, so the header costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q, QuerySet
from django.db.models.functions import Length, Substr

from annotate.models import Artifact, Document, StepKind, StepStatus, TraceStep

WINDOW = 100
FIRST_WINDOW = 40  # the first screen: a page shows about this many steps before anyone scrolls
PREVIEW = 1500  # characters of a step's input/output sent with the window; "show all" fetches the rest
LANES = 12  # distinct agent colours before they repeat

KIND_LABELS = dict(StepKind.choices)
EVIDENCE_LABELS = {"requested": "requested", "ran": "ran", "effect": "effect evidenced"}


def trace_summary_of(document: Document) -> dict:
    """The summary stored at import (steps, agents, start, end); empty for documents without steps."""
    summary = (document.meta or {}).get("trace") if isinstance(document.meta, dict) else None
    return summary if isinstance(summary, dict) and summary.get("steps") else {}


def has_steps(document: Document) -> bool:
    return bool(trace_summary_of(document))


def evidence_state(step: TraceStep, n_artifacts: int) -> str:
    """A tool call's evidence: *effect* once an artifact is linked to it, *ran* with a result or a
    finished span, else only *requested*. Other steps have none."""
    if step.kind != StepKind.TOOL_CALL:
        return ""
    if n_artifacts:
        return "effect"
    return "ran" if step.ran else "requested"


@dataclass
class StepRow:
    step: TraceStep
    lane: int
    input_head: str
    output_head: str
    input_len: int
    output_len: int
    artifacts: list[Artifact] = field(default_factory=list)
    evidence: str = ""
    offset_pct: float | None = None
    width_pct: float | None = None
    duration_ms: float | None = None
    start_ms: float | None = None  # from the trace's start
    has_children: bool = False

    @property
    def attributes(self) -> list[tuple[str, str]]:
        """The span's remaining attributes as pairs (a template cannot iterate a dict holding a key "items")."""
        rest = (self.step.detail or {}).get("attributes") if isinstance(self.step.detail, dict) else None
        return sorted((str(k), str(v)) for k, v in rest.items()) if isinstance(rest, dict) else []

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.step.kind, self.step.kind)

    @property
    def evidence_label(self) -> str:
        return EVIDENCE_LABELS.get(self.evidence, "")

    @property
    def input_long(self) -> bool:
        """Taller than the collapsed box (about four lines), so it gets a "show all"."""
        return self.input_more or len(self.input_head) > 400 or self.input_head.count("\n") >= 4

    @property
    def output_long(self) -> bool:
        return self.output_more or len(self.output_head) > 400 or self.output_head.count("\n") >= 4

    @property
    def input_more(self) -> bool:
        return self.input_len > len(self.input_head)

    @property
    def output_more(self) -> bool:
        return self.output_len > len(self.output_head)

    @property
    def is_error(self) -> bool:
        return self.step.status == StepStatus.ERROR


@dataclass
class TraceWindow:
    document: Document
    total: int
    agents: list[tuple[str, int]]  # (agent, lane)
    rows: list[StepRow]
    start: int
    next_start: int | None
    query: str = ""
    matches: int | None = None
    t0: datetime | None = None
    t1: datetime | None = None
    agent: str = ""
    errors_only: bool = False

    @property
    def filtered(self) -> bool:
        return bool(self.query or self.agent or self.errors_only)

    @property
    def span_ms(self) -> float | None:
        """The whole trace's duration, the timeline's scale."""
        if self.t0 and self.t1 and self.t1 > self.t0:
            return (self.t1 - self.t0).total_seconds() * 1000
        return None


def _time(value) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def _filtered(document: Document, *, start: int, query: str, agent: str, errors_only: bool) -> QuerySet[TraceStep]:
    """The trace's steps from `start` on that pass the viewer's filters (not yet ordered or cut)."""
    qs = TraceStep.objects.filter(document=document, index__gte=max(0, start))
    if query:
        qs = qs.filter(
            Q(name__icontains=query)
            | Q(agent__icontains=query)
            | Q(input__icontains=query)
            | Q(output__icontains=query)
            | Q(error__icontains=query)
        )
    if agent:
        qs = qs.filter(agent=agent)
    if errors_only:
        qs = qs.filter(status=StepStatus.ERROR)
    return qs


def trace_window(
    document: Document,
    *,
    start: int = 0,
    limit: int = FIRST_WINDOW,
    query: str = "",
    agent: str = "",
    errors_only: bool = False,
) -> TraceWindow:
    """Steps from index `start` on, `limit` at a time; with `query` only the steps whose text contains it,
    with `agent` only that agent's steps, with `errors_only` only the failed ones. The filters narrow the
    same two queries, so a filtered window costs what an unfiltered one does, whatever the trace's length."""
    summary = trace_summary_of(document)
    agents = [(a, i % LANES) for i, a in enumerate(summary.get("agents") or [])]
    lanes = dict(agents)
    limit = max(1, min(limit, 500))
    query, agent = query.strip()[:200], agent.strip()[:200]
    qs = _filtered(document, start=start, query=query, agent=agent, errors_only=errors_only)
    # The window's rows are chosen first, by index alone, and only they are measured and cut: without
    # fresh statistics PostgreSQL sorts all of a trace's steps after computing the annotations of each,
    # reading every step's whole text (250 ms for 5,000 steps).
    window = qs.order_by("index").values("pk")[: limit + 1]
    steps = list(
        TraceStep.objects.filter(pk__in=window)
        .order_by("index")
        .defer("input", "output")
        .annotate(
            input_head=Substr("input", 1, PREVIEW),
            output_head=Substr("output", 1, PREVIEW),
            input_len=Length("input"),
            output_len=Length("output"),
        )
    )
    more = len(steps) > limit
    # The step after the window tells whether the window's last step has children (they open the next window).
    parents = {s.parent_index for s in steps if s.parent_index is not None}
    steps = steps[:limit]
    by_step: dict[int, list[Artifact]] = {}
    if steps:
        for a in Artifact.objects.filter(step_id__in=[s.pk for s in steps]).order_by("id"):
            by_step.setdefault(a.step_id, []).append(a)
    t0, t1 = _time(summary.get("start")), _time(summary.get("end"))
    span = (t1 - t0).total_seconds() if t0 and t1 and t1 > t0 else None
    rows = []
    for s in steps:
        arts = by_step.get(s.pk, [])
        row = StepRow(
            step=s,
            lane=lanes.get(s.agent, LANES),
            input_head=s.input_head or "",
            output_head=s.output_head or "",
            input_len=s.input_len or 0,
            output_len=s.output_len or 0,
            artifacts=arts,
            evidence=evidence_state(s, len(arts)),
            has_children=s.index in parents,
        )
        if s.started_at and s.ended_at:
            row.duration_ms = max(0.0, (s.ended_at - s.started_at).total_seconds() * 1000)
        if t0 and s.started_at:
            row.start_ms = (s.started_at - t0).total_seconds() * 1000
        if span and s.started_at:
            row.offset_pct = round(100 * (s.started_at - t0).total_seconds() / span, 2)
            end = s.ended_at or s.started_at
            row.width_pct = round(max(0.3, 100 * (end - s.started_at).total_seconds() / span), 2)
        rows.append(row)
    return TraceWindow(
        document=document,
        total=int(summary.get("steps") or 0),
        agents=agents,
        rows=rows,
        start=start,
        next_start=(steps[-1].index + 1) if more else None,
        query=query,
        t0=t0,
        t1=t1,
        agent=agent,
        errors_only=errors_only,
    )


def step_text(document: Document, index: int, part: str) -> str | None:
    """One step's whole input, output or error (for "show all"); None if there is no such step."""
    if part not in ("input", "output", "error"):
        return None
    return TraceStep.objects.filter(document=document, index=index).values_list(part, flat=True).first()


def steps_upto(document: Document, last: int | None) -> list[TraceStep]:
    """Steps 0..last (all of them when last is None), for the cases export."""
    qs = TraceStep.objects.filter(document=document).order_by("index")
    return list(qs if last is None else qs.filter(index__lte=last))
