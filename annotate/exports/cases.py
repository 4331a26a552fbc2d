"""The cases export: each coded trace episode as a regression case a team can replay against its agent.

One JSON object per trace episode with a usable final label: the steps up to and including the
decisive step, the final codes and the attribution, and the artifacts linked to those steps (and
those linked to no step). Streamed in chunks of episodes, so memory stays bounded by a chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from annotate.analysis.attribution import final_attribution
from annotate.coding.labels import resolve_label
from annotate.coding.selectors import codebook_picker
from annotate.models import Adjudication, Artifact, Coding, DocumentKind, Episode, Study, TraceStep
from annotate.traces.selectors import evidence_state

CHUNK = 20  # episodes per chunk: a chunk holds their steps, up to 5,000 each


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _step(s: TraceStep, n_artifacts: int) -> dict[str, Any]:
    return {
        "index": s.index,
        "parent": s.parent_index,
        "span_id": s.span_id,
        "agent": s.agent,
        "kind": s.kind,
        "name": s.name,
        "input": s.input,
        "output": s.output,
        "started_at": _iso(s.started_at),
        "ended_at": _iso(s.ended_at),
        "status": s.status,
        "error": s.error,
        "paired": s.paired_index,
        "evidence": evidence_state(s, n_artifacts) or None,
    }


def case_rows(study: Study, episodes) -> Iterator[dict[str, Any]]:
    """Regression cases of the study's coded trace episodes among `episodes`, in id order.

    Five queries per chunk: episodes with documents, codings, adjudications, steps, artifacts.
    """
    picker = codebook_picker(study.codebook)
    qs = episodes.filter(document__kind=DocumentKind.TRACE).select_related("document").order_by("id")
    last = 0
    while True:
        batch = list(qs.filter(id__gt=last)[:CHUNK])
        if not batch:
            return
        last = batch[-1].pk
        ids = [e.pk for e in batch]
        codings: dict[int, list[Coding]] = {}
        for c in Coding.objects.filter(episode_id__in=ids).order_by("coder_id"):
            codings.setdefault(c.episode_id, []).append(c)
        adjudications = {a.episode_id: a for a in Adjudication.objects.filter(episode_id__in=ids)}
        cases = []
        for e in batch:
            label = resolve_label(
                adjudication=adjudications.get(e.pk),
                codings=codings.get(e.pk, []),
                k=study.coders_per_episode,
                rule=study.label_rule,
                label_coder_id=study.label_coder_id,
            )
            if label.usable:
                attribution = final_attribution(
                    adjudication=adjudications.get(e.pk),
                    codings=codings.get(e.pk, []),
                    k=study.coders_per_episode,
                    study=study,
                )
                cases.append((e, label, attribution))
        doc_ids = [e.document_id for e, _, _ in cases]
        steps: dict[int, list[TraceStep]] = {}
        for s in TraceStep.objects.filter(document_id__in=doc_ids).order_by("document_id", "index"):
            steps.setdefault(s.document_id, []).append(s)
        artifacts: dict[int, list[Artifact]] = {}
        for a in Artifact.objects.filter(document_id__in=doc_ids).select_related("step").order_by("id"):
            artifacts.setdefault(a.document_id, []).append(a)
        for e, label, attribution in cases:
            yield _case(
                study, picker, e, label, attribution, steps.get(e.document_id, []), artifacts.get(e.document_id, [])
            )


def _case(study, picker, e: Episode, label, attribution, steps, artifacts) -> dict[str, Any]:
    last = attribution.step
    kept = [s for s in steps if last is None or s.index <= last]
    kept_ids = {s.pk for s in kept}
    linked = [a for a in artifacts if a.step_id is None or a.step_id in kept_ids]
    per_step: dict[int, int] = {}
    for a in artifacts:
        if a.step_id:
            per_step[a.step_id] = per_step.get(a.step_id, 0) + 1
    doc = e.document
    return {
        "case_id": f"{study.slug}:{e.pk}",
        "study": study.slug,
        "codebook": study.codebook.label,
        "document": {
            "kind": doc.kind,
            "external_id": doc.external_id,
            "title": doc.title,
            "url": doc.url,
            "cluster": doc.cluster,
            "format": (doc.meta or {}).get("format"),
            "question": (doc.meta or {}).get("question"),
        },
        "label": {
            "status": label.status,
            "failure_type": picker.type_code(label.failure_type_id) or None,
            "source": picker.axis_code(label.source_id) or None,
            "stage": picker.axis_code(label.stage_id) or None,
            "capability": picker.axis_code(label.capability_id) or None,
            "not_a_failure": label.not_a_failure,
            "needs_new_type": label.needs_new_type,
        },
        "attribution": {"decisive_step": attribution.step, "responsible_agent": attribution.agent or None},
        "reference": e.reference or None,
        "steps_total": len(steps),
        "steps": [_step(s, per_step.get(s.pk, 0)) for s in kept],
        "artifacts": [
            {
                "kind": a.kind,
                "name": a.name,
                "content": a.content,
                "url": a.url,
                "step": a.step.index if a.step_id else None,
                "span_id": a.step.span_id if a.step_id else None,
            }
            for a in linked
        ],
    }
