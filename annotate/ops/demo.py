"""The demo study: the shipped samples, a demo owner and two demo coders.

Both coders code most episodes from the gold labels; the second coder departs
from them on a fixed set of episodes, so the queue, adjudication and analysis
pages all have content on a first `make run`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from annotate.coding.services import CodingValues, coding_save
from annotate.imports.services import import_file
from annotate.models import Adjudication, DocumentKind, Episode, EpisodeStatus, Split, Study
from annotate.studies.services import study_create, study_data_changed
from taxonomy.models import Axis, AxisValue, Codebook, FailureType

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"
DEMO_SLUG = "demo"
DEMO_USERS = (("demo-owner", "owner"), ("demo-coder1", "coder"), ("demo-coder2", "coder"))


@dataclass
class DemoResult:
    study: Study
    created: bool
    logins: list[tuple[str, str, str]]  # (username, password, role)


def _load_documents(study: Study) -> None:
    """The shipped samples through the real importers: GitHub issues (pull requests skipped)
    and the BibTeX literature records."""
    import_file(study=study, path=SAMPLES / "github_issues.json")
    import_file(study=study, path=SAMPLES / "literature.bib")


def _gold_values(label: dict, types: dict, values: dict) -> CodingValues:
    if label["not_a_failure"]:
        return CodingValues(not_a_failure=True, not_a_failure_reason="The reporter's own configuration.")
    return CodingValues(
        failure_type=types[label["failure_type"]],
        source=values[(Axis.SOURCE, label["source"])],
        stage=values[(Axis.STAGE, label["stage"])],
        capability=values[(Axis.CAPABILITY, label["capability"])],
        confidence="high",
    )


def _disagree(v: CodingValues, n: int, types: dict, values: dict) -> CodingValues:
    """A plausible second reading: another stage, or a neighbouring type in the same category."""
    if v.not_a_failure:
        return v
    if n % 2:
        stages = [val for (axis, _), val in values.items() if axis == Axis.STAGE and val != v.stage]
        return CodingValues(**{**v.__dict__, "stage": stages[n % len(stages)], "confidence": "medium"})
    same_category = [t for t in types.values() if t.category_id == v.failure_type.category_id and t != v.failure_type]
    other = same_category[n % len(same_category)] if same_category else v.failure_type
    return CodingValues(**{**v.__dict__, "failure_type": other, "confidence": "low", "memo": "Borderline."})


@transaction.atomic
def demo_build(*, reset: bool = False) -> DemoResult:
    User = get_user_model()
    logins = []
    users = {}
    for username, role in DEMO_USERS:
        user, _ = User.objects.get_or_create(username=username)
        password = secrets.token_urlsafe(9)
        user.set_password(password)
        # The owner `make run` prints is the person running this instance: staff, so the study list offers
        # New study (may_create_studies) as it would to the administrator of a real one. Not a superuser:
        # it holds no model permissions in the admin site.
        user.is_staff = role == "owner"
        user.save()
        users[role if role == "owner" else username] = user
        logins.append((username, password, role))

    existing = Study.objects.filter(slug=DEMO_SLUG).first()
    if existing and not reset:
        return DemoResult(study=existing, created=False, logins=logins)
    if existing:
        existing.delete()

    codebook = Codebook.objects.get(name="agentic-failures", version="1.0")
    study = study_create(
        slug=DEMO_SLUG,
        name="Demo: why agentic workflows fail",
        codebook=codebook,
        owner=users["owner"],
        coders=[users["demo-coder1"], users["demo-coder2"]],
        description="Sample GitHub issues and literature records, double-coded from the gold labels.",
    )
    _load_documents(study)

    types = {t.code: t for t in FailureType.objects.filter(codebook=codebook).select_related("category")}
    values = {(v.axis, v.code): v for v in AxisValue.objects.filter(codebook=codebook)}
    gold = {g["id"]: g for g in json.loads((SAMPLES / "gold_labels.json").read_text(encoding="utf-8"))}
    episodes = list(Episode.objects.filter(study=study).select_related("document", "study").order_by("id"))

    # The last four literature records are the hold-out set, as later papers would be.
    literature = [e for e in episodes if e.document.kind == DocumentKind.LITERATURE]
    Episode.objects.filter(pk__in=[e.pk for e in literature[-4:]]).update(split=Split.HOLDOUT)

    coder1, coder2, owner = users["demo-coder1"], users["demo-coder2"], users["owner"]
    adjudicated = 0
    for n, ep in enumerate(episodes):
        label = gold.get(ep.document.url if ep.document.kind == DocumentKind.GITHUB_ISSUE else ep.document.external_id)
        if label is None or n % 10 == 9:
            continue  # leave every tenth episode for the queue
        v = _gold_values(label, types, values)
        coding_save(episode=ep, coder=coder1, values=v, version=None)
        second = _disagree(v, n, types, values) if n % 7 == 3 else v
        coding_save(episode=ep, coder=coder2, values=second, version=None)
        if second != v and adjudicated < 2:
            Adjudication.objects.create(
                episode=ep,
                adjudicator=owner,
                failure_type=v.failure_type,
                source=v.source,
                stage=v.stage,
                capability=v.capability,
                rationale="The decisive error matches the first coder's reading.",
            )
            Episode.objects.filter(pk=ep.pk).update(status=EpisodeStatus.ADJUDICATED)
            adjudicated += 1
    study_data_changed(study_id=study.pk)  # the hold-out split and the adjudications above bypass the services
    return DemoResult(study=study, created=True, logins=logins)


DEMO_INCIDENTS_SLUG = "demo-incidents"
# Fictional incidents, written for the demo: one per kind of blame a triager routes on.
DEMO_INCIDENTS = (
    ("checkout-agent", "high", "Refund tool called three times for one order",
     "Order 4471 was refunded three times. The agent called `refund_payment` once, got a slow answer, and "
     "called it again twice before the first call returned. Our tool description does not say the call is "
     "not idempotent, and the loop has no guard against repeating a side-effecting call."),
    ("support-bot", "critical", "Bot quoted another customer's order number",
     "A customer asked where their parcel was and the bot answered with the tracking number of a different "
     "customer from an earlier conversation. The session memory store returned the previous session's summary "
     "because both sessions shared one key after the cache restart."),
    ("research-agent", "medium", "Search API throttled; agent reported that no sources exist",
     "The web search tool answered HTTP 429 Too Many Requests for every query in the run. The agent treated "
     "the empty results as an answer and told the user there is no published work on the topic."),
    ("code-review-agent", "high", "Agent approved a pull request whose tests were skipped",
     "The review agent wrote 'all checks pass, approving'. The CI log shows the test job was skipped because "
     "of a path filter; the agent read the green badge and never opened the job's output."),
    ("travel-planner", "low", "Flight booked for the wrong Friday",
     "The user wrote 'book me on the flight next Friday' on a Thursday. The agent booked the flight for the "
     "next day; the user meant the Friday of the following week. The request gave no date."),
    ("data-pipeline-agent", "medium", "Every run fails after the model name changed in the deployment config",
     "Since the deploy on Monday each run stops at the first step with 'model not found'. The environment "
     "variable still names the retired model; the agent code and prompts did not change."),
)  # fmt: skip


@transaction.atomic
def demo_incidents_build(*, reset: bool = False) -> Study | None:
    """An incident study beside the demo (`make run`): the desk, the board and triage have content at once.

    Incidents reach only a study that accepts them (never a research queue), so this is a study of its
    own, owned by demo-owner with demo-coder1 as the triager. Each incident comes in through
    incident_create, as the API's would, and queues its suggestion. Needs demo_build's users first.
    """
    from annotate.incidents.services import IncidentData, incident_create, incident_move
    from annotate.models import TriageStatus

    User = get_user_model()
    owner = User.objects.filter(username="demo-owner").first()
    triager = User.objects.filter(username="demo-coder1").first()
    if owner is None or triager is None:
        return None
    existing = Study.objects.filter(slug=DEMO_INCIDENTS_SLUG).first()
    if existing and not reset:
        return existing
    if existing:
        existing.delete()
    study = study_create(
        slug=DEMO_INCIDENTS_SLUG,
        name="Demo: agent incident desk",
        codebook=Codebook.objects.get(name="agentic-failures", version="1.0"),
        owner=owner,
        coders=[triager],
        description="Incidents from production agents, routed by responsibility source. Send more with "
        "POST /api/v1/studies/demo-incidents/incidents/.",
    )
    study.accepts_incidents = True
    study.save(update_fields=["accepts_incidents"])
    documents = [
        incident_create(
            study=study, user=owner,
            data=IncidentData(service=service, title=title, description=body, severity=severity,
                              external_id=f"demo-{n}"),
        ).document
        for n, (service, severity, title, body) in enumerate(DEMO_INCIDENTS, start=1)
    ]  # fmt: skip
    incident_move(document=documents[0], user=owner, to_status=TriageStatus.TRIAGED, assignee=triager,
                  note="Side-effecting tool without a guard: ours to fix.")  # fmt: skip
    incident_move(document=documents[5], user=owner, to_status=TriageStatus.RESOLVED,
                  note="Config fixed in the deployment.")  # fmt: skip
    return study
