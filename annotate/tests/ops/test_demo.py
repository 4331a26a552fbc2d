import pytest
from django.core.management import CommandError, call_command

from annotate.models import Adjudication, Coding, Document, Episode, Study, Suggestion
from annotate.ops.demo import DEMO_INCIDENTS


def test_it_builds_the_demo_study_and_prints_logins(codebook, capsys, eager_jobs):
    call_command("demo")
    out = capsys.readouterr().out
    for username in ("demo-owner", "demo-coder1", "demo-coder2"):
        assert username in out
    assert "password:" in out
    study = Study.objects.get(slug="demo")
    assert Document.objects.filter(study=study, kind="github_issue").count() == 58
    assert Document.objects.filter(study=study, kind="literature").count() == 24
    assert Document.objects.filter(study=study, kind="github_issue").values("cluster").distinct().count() == 14
    episodes = Episode.objects.filter(study=study)
    both = episodes.filter(n_codings=2).count()
    assert both > 0.8 * episodes.count()
    assert episodes.filter(n_codings=0).exists()  # something left for the queue
    assert Adjudication.objects.filter(episode__study=study).exists()
    assert Coding.objects.filter(episode__study=study).count() == 2 * both


def test_the_two_demo_coders_disagree_somewhere(codebook, eager_jobs):
    call_command("demo")
    disagreements = 0
    for ep in Episode.objects.filter(study__slug="demo", n_codings=2).prefetch_related("codings"):
        a, b = ep.codings.all()
        if (a.failure_type_id, a.stage_id) != (b.failure_type_id, b.stage_id):
            disagreements += 1
    assert 3 <= disagreements <= 15


def test_it_is_rerunnable(codebook, eager_jobs):
    call_command("demo")
    call_command("demo")
    assert Study.objects.filter(slug="demo").count() == 1
    assert Document.objects.filter(study__slug="demo").count() == 82
    assert Document.objects.filter(study__slug="demo-incidents").count() == len(DEMO_INCIDENTS)


def test_it_opens_an_incident_desk_beside_the_research_study(
    codebook, capsys, eager_jobs, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # the suggestions queue on commit
        call_command("demo")
    assert "incident desk 'demo-incidents': 6 incidents to triage" in capsys.readouterr().out
    desk = Study.objects.get(slug="demo-incidents")
    assert desk.accepts_incidents and not Study.objects.get(slug="demo").accepts_incidents
    roles = dict(desk.memberships.values_list("user__username", "role"))
    assert roles == {"demo-owner": "owner", "demo-coder1": "coder"}
    incidents = Document.objects.filter(study=desk, kind="incident").order_by("external_id")
    assert incidents.count() == 6
    assert sorted(incidents.values_list("triage_status", flat=True)) == ["new"] * 4 + ["resolved", "triaged"]
    assert incidents.get(triage_status="triaged").assignee.username == "demo-coder1"
    # Each came in as the API's would: an episode with its suggestion, the research queue untouched.
    assert Suggestion.objects.filter(episode__study=desk, error="").count() == 6
    assert not Document.objects.filter(study__slug="demo", kind="incident").exists()
    call_command("demo", "--reset")
    assert Document.objects.filter(study__slug="demo-incidents").count() == 6


def test_it_needs_the_codebook(db):
    with pytest.raises(CommandError, match="load the codebook first"):
        call_command("demo")
