"""Where incidents may go: only to a study that accepts them, never into a research study's coding queue."""

from __future__ import annotations

import pytest
from django.apps import apps

from annotate.coding.selectors import coder_queue_left
from annotate.models import Document, Episode, Study
from annotate.studies.services import study_create


def _incident(study: str = "alpha", **extra) -> dict:
    return {"study": study, "service": "checkout-agent", "title": "Refund loop", "description": "It looped.", **extra}


@pytest.fixture
def ops(codebook, alice, bob):
    """An incident study: it accepts incidents; Bob triages there too."""
    made = study_create(slug="ops", name="Ops incidents", codebook=codebook, owner=alice, coders=[bob])
    Study.objects.filter(pk=made.pk).update(accepts_incidents=True)
    made.refresh_from_db()
    return made


def test_it_refuses_an_incident_for_a_research_study_and_says_how_to_opt_in(as_user, bob, study, make_episode):
    for _ in range(3):
        make_episode(study)
    before = coder_queue_left(study, bob)
    response = as_user(bob).post("/api/v1/incidents/", _incident(), format="json")
    assert response.status_code == 400
    message = " ".join(response.json()["study"])
    assert "does not accept incidents" in message and "“Accept incidents”" in message
    assert "/studies/alpha/settings/webhook/" in message and "Post it to an incident study" in message
    assert not Document.objects.filter(kind="incident").exists()
    assert (
        (coder_queue_left(study, bob).left, coder_queue_left(study, bob).total) == (before.left, before.total) == (3, 3)
    )


def test_the_refusal_names_the_incident_studies_the_sender_may_post_to(as_user, bob, study, ops, charlie, codebook):
    hidden = study_create(slug="hidden-ops", name="Not Bob's", codebook=codebook, owner=charlie)
    Study.objects.filter(pk=hidden.pk).update(accepts_incidents=True)
    message = " ".join(as_user(bob).post("/api/v1/incidents/", _incident(), format="json").json()["study"])
    assert "(ops)" in message and "hidden-ops" not in message


def test_an_incident_study_takes_it_and_the_research_queue_stays_as_it_was(as_user, bob, study, ops, make_episode):
    """The report: a research study's "82 of 82 left" became "68 of 84" once incidents were posted to it."""
    for _ in range(4):
        make_episode(study)
    response = as_user(bob).post("/api/v1/incidents/", _incident("ops"), format="json")
    assert response.status_code == 201
    assert Episode.objects.get(document_id=response.json()["id"]).study_id == ops.pk
    left = coder_queue_left(study, bob)
    assert (left.left, left.total) == (4, 4)
    assert coder_queue_left(ops, bob).total == 1  # the incident study's own queue has it


def test_an_owner_opens_and_closes_intake_on_the_settings_page(client, alice, bob, study, as_user):
    url = "/studies/alpha/settings/webhook/"
    client.force_login(bob)
    assert client.post(url, {"action": "intake", "accepts_incidents": "on"}).status_code == 403
    client.force_login(alice)
    page = client.post(url, {"action": "intake", "accepts_incidents": "on"})
    assert page.status_code == 200 and "This study now accepts incidents." in page.content.decode()
    assert Study.objects.get(pk=study.pk).accepts_incidents
    assert as_user(bob).post("/api/v1/incidents/", _incident(), format="json").status_code == 201
    client.post(url, {"action": "intake"})  # the box unchecked
    assert not Study.objects.get(pk=study.pk).accepts_incidents
    assert as_user(bob).post("/api/v1/incidents/", _incident(external_id="x2"), format="json").status_code == 400
    assert Document.objects.filter(kind="incident").count() == 1  # the stored one stays


def test_the_board_says_when_a_study_does_not_take_incidents(client, alice, vera, study):
    client.force_login(alice)
    html = client.get("/studies/alpha/incidents/").content.decode()
    assert 'id="intake-off"' in html and "/studies/alpha/settings/webhook/#intake-h" in html
    client.force_login(vera)
    html = client.get("/studies/alpha/incidents/").content.decode()
    assert 'id="intake-off"' in html and "An owner can turn on" in html
    Study.objects.filter(pk=study.pk).update(accepts_incidents=True)
    assert 'id="intake-off"' not in client.get("/studies/alpha/incidents/").content.decode()


def test_the_migration_opts_in_only_studies_that_hold_nothing_but_incidents(study, other_study, codebook, alice):
    from importlib import import_module

    migration = import_module("annotate.migrations.0012_accepts_incidents")
    pure = study_create(slug="pure", name="Pure", codebook=codebook, owner=alice)
    for s, kind in ((pure, "incident"), (study, "incident"), (study, "github_issue"), (other_study, "literature")):
        Document.objects.create(study=s, kind=kind, external_id=f"{s.slug}-{kind}", cluster="c", title="t")
    Study.objects.update(accepts_incidents=False)
    migration.opt_in_incident_studies(apps, None)
    assert set(Study.objects.filter(accepts_incidents=True).values_list("slug", flat=True)) == {"pure"}


def test_the_studies_api_says_which_studies_take_incidents(as_user, bob, study, ops):
    rows = {s["slug"]: s["accepts_incidents"] for s in as_user(bob).get("/api/v1/studies/").json()["results"]}
    assert rows == {"alpha": False, "ops": True}
