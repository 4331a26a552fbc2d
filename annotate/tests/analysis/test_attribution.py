"""Decisive step and responsible agent on codings: validation, history, blinding of the reference, and the
agreement document's attribution section against the Who&When references."""

from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils.html import escape

from annotate.analysis.coders import agreement_document
from annotate.coding.adjudication import AdjudicationValues, adjudication_save
from annotate.coding.services import CodingValues, coding_save
from annotate.models import Coding, Episode, LabelRule

WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


@pytest.fixture
def traces(study):
    from annotate.traces.services import import_traces

    import_traces(study=study, paths=[WHO / "Algorithm-Generated"], fmt="whowhen")
    return list(Episode.objects.filter(study=study).select_related("document", "study").order_by("pk"))


def values(codes, step=None, agent=""):
    return CodingValues(
        failure_type=codes.type("TUS-03"),
        source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
        decisive_step=step,
        responsible_agent=agent,
    )


def test_a_coding_keeps_its_attribution_with_history(traces, bob, codes):
    ep = traces[0]
    coding = coding_save(episode=ep, coder=bob, values=values(codes, 1, "Excel_Expert"), version=None)
    coding = coding_save(episode=ep, coder=bob, values=values(codes, 2, "Excel_Expert"), version=coding.version)
    assert (coding.decisive_step, coding.responsible_agent) == (2, "Excel_Expert")
    assert [h.decisive_step for h in coding.history.order_by("history_id")] == [1, 2]


def test_a_step_outside_the_trace_or_on_a_document_without_steps_is_refused(traces, bob, codes, make_episode):
    n = traces[0].document.meta["trace"]["steps"]
    with pytest.raises(ValidationError) as exc:
        coding_save(episode=traces[0], coder=bob, values=values(codes, n, "x"), version=None)
    assert "decisive_step" in exc.value.message_dict
    plain = make_episode(study=traces[0].study)
    with pytest.raises(ValidationError) as exc:
        coding_save(episode=plain, coder=bob, values=values(codes, 0), version=None)
    assert "no trace steps" in exc.value.message_dict["decisive_step"][0]
    assert not Coding.objects.exists()


def test_the_reference_is_hidden_from_a_blind_coder_until_they_save(client, traces, bob, codes):
    ep = traces[0]
    client.force_login(bob)
    url = f"/studies/{ep.study.slug}/episodes/{ep.pk}/code/"
    reason = escape(ep.reference["reason"])
    html = client.get(url).content.decode()
    assert reason not in html and 'id="reference-hidden"' in html
    assert reason not in client.get(f"/studies/{ep.study.slug}/episodes/{ep.pk}/").content.decode()
    coding_save(episode=ep, coder=bob, values=values(codes, 0, "Excel_Expert"), version=None)
    html = client.get(url).content.decode()
    assert reason in html and "Reference attribution" in html


def test_the_agreement_document_measures_agents_steps_and_accuracy(traces, alice, bob, codes):
    # Bob copies the reference on every log; Alice is one step late and names the same agent on half.
    for i, ep in enumerate(traces):
        ref = ep.reference
        coding_save(episode=ep, coder=bob, values=values(codes, ref["step"], ref["agent"].upper()), version=None)
        last = ep.document.meta["trace"]["steps"] - 1
        agent = ref["agent"] if i % 2 == 0 else "someone_else"
        coding_save(episode=ep, coder=alice, values=values(codes, min(ref["step"] + 1, last), agent), version=None)
    a = agreement_document(ep.study, bootstrap=200, seed=1)["attribution"]
    assert a["trace_episodes"] == 10
    raters = {r["rater"]: r for r in a["reference"]["raters"]}
    assert raters["bob"]["agent"]["value"] == 1.0 and raters["bob"]["step"]["exact"]["value"] == 1.0
    assert raters["bob"]["agent"]["n"] == 10
    assert raters["alice"]["agent"]["value"] == 0.5
    late = sum(1 for ep in traces if ep.reference["step"] + 1 <= ep.document.meta["trace"]["steps"] - 1)
    assert raters["alice"]["step"]["exact"]["value"] == pytest.approx((10 - late) / 10)
    assert raters["alice"]["step"]["within_1"]["value"] == 1.0
    # The coders disagree on every step but the clipped ones: the final labels have only those.
    assert raters["final labels"]["step"]["exact"]["n"] == 10 - late
    step = a["agreement"]["step"]
    assert step["n_episodes"] == 10 and step["within_1"]["value"] == 1.0
    assert step["exact"]["value"] == pytest.approx((10 - late) / 10)
    assert a["agreement"]["agent"]["percent_agreement"]["value"] == pytest.approx(0.5)


def test_the_adjudicated_attribution_is_the_final_one(traces, alice, bob, codes):
    ep = traces[0]
    coding_save(episode=ep, coder=bob, values=values(codes, 0, "a"), version=None)
    coding_save(episode=ep, coder=alice, values=values(codes, 1, "b"), version=None)
    adjudication_save(
        episode=ep,
        adjudicator=alice,
        values=AdjudicationValues(
            failure_type=codes.type("TUS-03"),
            source=codes.source("agent_design"),
            stage=codes.stage("iterative_execution"),
            capability=codes.capability("actuation"),
            rationale="step 0 decided it",
            decisive_step=ep.reference["step"],
            responsible_agent=ep.reference["agent"],
        ),
    )
    a = agreement_document(ep.study, bootstrap=100)["attribution"]
    final = next(r for r in a["reference"]["raters"] if r["rater"] == "final labels")
    assert final["step"]["exact"]["k"] == 1 and final["agent"]["k"] == 1


def test_the_agreement_command_prints_the_attribution(traces, alice, bob, codes):
    for ep in traces[:3]:
        coding_save(
            episode=ep, coder=bob, values=values(codes, ep.reference["step"], ep.reference["agent"]), version=None
        )
    out = StringIO()
    call_command("agreement", "--study", traces[0].study.slug, "--bootstrap", "100", stdout=out)
    text = out.getvalue()
    assert "Attribution (10 trace episodes)" in text
    assert "accuracy against the reference (10 episodes with one)" in text
    assert "bob" in text and "100.0% " in text


def test_single_coder_rule_takes_that_coders_attribution(traces, alice, bob, codes):
    study = traces[0].study
    study.label_rule, study.label_coder = LabelRule.SINGLE_CODER, bob
    study.save()
    ep = traces[0]
    coding_save(episode=ep, coder=bob, values=values(codes, ep.reference["step"], ep.reference["agent"]), version=None)
    a = agreement_document(study, bootstrap=100)["attribution"]
    final = next(r for r in a["reference"]["raters"] if r["rater"] == "final labels")
    assert final["step"]["exact"]["k"] == 1
