"""Every endpoint: no token 401, non-member 404, viewer writing 403, and no list leaks another study's rows."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Document, Job

STUDY_READS = [
    "/api/v1/studies/{slug}/",
    "/api/v1/studies/{slug}/documents/",
    "/api/v1/studies/{slug}/episodes/",
    "/api/v1/studies/{slug}/codings/",
    "/api/v1/studies/{slug}/export/?format=jsonl",
    "/api/v1/studies/{slug}/export/?format=csv",
    "/api/v1/studies/{slug}/export/?format=parquet",
]
STUDY_WRITES = [
    ("/api/v1/studies/{slug}/codings/", "json"),
    ("/api/v1/studies/{slug}/import/", "file"),
    ("/api/v1/studies/{slug}/suggest/", "json"),
    ("/api/v1/studies/{slug}/analysis/", "json"),
]
GLOBAL_READS = ["/api/v1/studies/", "/api/v1/codebooks/", "/api/v1/incidents/"]


def _post(client, url, kind, episode_id=None):
    if kind == "file":
        upload = SimpleUploadedFile("issues.json", b"[]", content_type="application/json")
        return client.post(url, {"file": upload}, format="multipart")
    body = {"episode": episode_id, "failure_type": "TUS-03"} if "codings" in url else {}
    return client.post(url, body, format="json")


@pytest.fixture
def incident(incidents_open, study, bob):
    from annotate.incidents.services import IncidentData, incident_create

    return incident_create(
        study=study, user=bob, data=IncidentData(service="checkout-agent", title="Refund loop", description="x")
    ).document


@pytest.mark.parametrize("url", STUDY_READS + [u for u, _ in STUDY_WRITES] + GLOBAL_READS)
def test_it_answers_401_without_a_token(api, study, url):
    response = api.get(url.format(slug=study.slug))
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"].startswith("Token")


@pytest.mark.parametrize(("url", "kind"), STUDY_WRITES)
def test_it_answers_401_to_anonymous_writes(api, study, url, kind):
    assert _post(api, url.format(slug=study.slug), kind).status_code == 401


def test_it_answers_401_to_a_revoked_or_made_up_token(api, bob, study):
    from annotate.studies.tokens import token_create, token_revoke

    token, key = token_create(user=bob, name="laptop")
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/studies/").status_code == 200
    token_revoke(user=bob, token_id=token.pk)
    assert api.get("/api/v1/studies/").status_code == 401
    api.credentials(HTTP_AUTHORIZATION="Token flt_not-a-real-key")
    assert api.get("/api/v1/studies/").status_code == 401


@pytest.mark.parametrize("url", STUDY_READS)
def test_it_hides_a_study_from_non_members_with_404(as_user, charlie, study, url):
    assert as_user(charlie).get(url.format(slug=study.slug)).status_code == 404


@pytest.mark.parametrize(("url", "kind"), STUDY_WRITES)
def test_it_hides_a_study_from_non_member_writers_with_404(as_user, charlie, study, url, kind, make_episode):
    ep = make_episode(study)
    assert _post(as_user(charlie), url.format(slug=study.slug), kind, ep.pk).status_code == 404


@pytest.mark.parametrize(("url", "kind"), STUDY_WRITES)
def test_it_forbids_viewers_to_write(as_user, vera, study, url, kind, make_episode):
    ep = make_episode(study)
    response = _post(as_user(vera), url.format(slug=study.slug), kind, ep.pk)
    assert response.status_code == 403, response.content
    assert not Job.objects.exists()


@pytest.mark.parametrize("url", STUDY_READS)
def test_it_lets_viewers_read(as_user, vera, study, url):
    response = as_user(vera).get(url.format(slug=study.slug))
    assert response.status_code == 200, getattr(response, "content", b"")


def test_it_hides_other_studies_jobs_and_incidents(incidents_open, as_user, charlie, study, incident, bob):
    job = Job.objects.create(kind="recount", study=study, created_by=bob)
    client = as_user(charlie)
    assert client.get(f"/api/v1/jobs/{job.pk}/").status_code == 404
    assert client.get(f"/api/v1/jobs/{job.pk}/file/").status_code == 404
    assert client.get(f"/api/v1/incidents/{incident.pk}/").status_code == 404
    move = client.post(f"/api/v1/incidents/{incident.pk}/triage/", {"status": "triaged", "assignee": "charlie"})
    assert move.status_code == 404
    assert api_post_incident(client, study.slug).status_code == 404


def test_it_forbids_viewers_to_report_or_move_incidents(incidents_open, as_user, vera, study, incident):
    client = as_user(vera)
    assert api_post_incident(client, study.slug).status_code == 403
    move = client.post(f"/api/v1/incidents/{incident.pk}/triage/", {"status": "triaged", "assignee": "bob"})
    assert move.status_code == 403
    assert client.get(f"/api/v1/incidents/{incident.pk}/").status_code == 200
    assert Document.objects.filter(kind="incident").count() == 1


def api_post_incident(client, slug):
    body = {"study": slug, "service": "svc", "title": "t", "description": "d"}
    return client.post("/api/v1/incidents/", body, format="json")


def _ids(payload):
    return [row.get("id") or row.get("slug") for row in payload["results"]]


def test_no_list_leaks_another_studys_rows(as_user, alice, study, coded, charlies_rows, other_study, charlie):
    from annotate.incidents.services import IncidentData, incident_create

    other_study.accepts_incidents = True
    other_study.save(update_fields=["accepts_incidents"])
    secret = incident_create(
        study=other_study, user=charlie, data=IncidentData(service="s", title="secret", description="d")
    ).document
    Job.objects.create(kind="recount", study=other_study, created_by=charlie)
    client = as_user(alice)
    assert _ids(client.get("/api/v1/studies/").json()) == ["alpha"]
    for path in ("documents", "episodes", "codings"):
        body = client.get(f"/api/v1/studies/alpha/{path}/").json()
        text = str(body)
        assert "secret" not in text and "Charlie" not in text, path
        assert body["results"], path
    incidents = client.get("/api/v1/incidents/").json()["results"]
    assert secret.pk not in [i["id"] for i in incidents]
    assert client.get(f"/api/v1/incidents/?study={other_study.slug}").json()["results"] == []
    export = b"".join(client.get("/api/v1/studies/alpha/export/?format=jsonl").streaming_content)
    assert b"secret" not in export and export.count(b"\n") == 2
    # Filtering by a user of the other study is a field error, not a way in.
    assert client.get(f"/api/v1/studies/alpha/codings/?coder={charlie.pk}").status_code == 400


def test_a_blind_study_shows_a_coder_only_the_codings_of_episodes_they_coded(as_user, bob, alice, study, coded, codes):
    from annotate.coding.services import CodingValues, coding_save

    ep, other = coded
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=other, coder=alice, values=values, version=None)
    rows = as_user(bob).get("/api/v1/studies/alpha/codings/").json()["results"]
    assert sorted((r["episode"], r["coder_username"]) for r in rows) == [(ep.pk, "alice"), (ep.pk, "bob")]
    rows = as_user(alice).get("/api/v1/studies/alpha/codings/").json()["results"]
    assert len(rows) == 3
    assert as_user(bob).get("/api/v1/studies/alpha/export/").status_code == 403
