import pytest
from django.core.management import CommandError, call_command

from annotate.models import Adjudication, Coding, Document, Episode, Study


def test_it_builds_the_demo_study_and_prints_logins(codebook, capsys):
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


def test_the_two_demo_coders_disagree_somewhere(codebook):
    call_command("demo")
    disagreements = 0
    for ep in Episode.objects.filter(study__slug="demo", n_codings=2).prefetch_related("codings"):
        a, b = ep.codings.all()
        if (a.failure_type_id, a.stage_id) != (b.failure_type_id, b.stage_id):
            disagreements += 1
    assert 3 <= disagreements <= 15


def test_it_is_rerunnable(codebook):
    call_command("demo")
    call_command("demo")
    assert Study.objects.filter(slug="demo").count() == 1
    assert Document.objects.count() == 82


def test_it_needs_the_codebook(db):
    with pytest.raises(CommandError, match="load the codebook first"):
        call_command("demo")
