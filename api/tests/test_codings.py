"""Saving codings through the API: the UI's service, optimistic locking, field errors and history."""

from __future__ import annotations

from annotate.models import Coding

URL = "/api/v1/studies/alpha/codings/"


def _body(episode, **extra):
    return {
        "episode": episode.pk, "failure_type": "TUS-03", "source": "llm", "stage": "iterative_execution",
        "capability": "actuation", "confidence": "high", **extra,
    }  # fmt: skip


def test_it_creates_then_updates_a_coding_with_history(as_user, bob, study, make_episode):
    ep = make_episode(study)
    client = as_user(bob)
    created = client.post(URL, _body(ep), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["version"] == 1 and created.json()["coder_username"] == "bob"
    updated = client.post(URL, _body(ep, stage="planning", version=1), format="json")
    assert updated.status_code == 200, updated.content
    assert updated.json()["stage"] == "planning" and updated.json()["version"] == 2
    coding = Coding.objects.get(episode=ep, coder=bob)
    history = list(coding.history.order_by("history_date"))
    assert [h.version for h in history] == [1, 2]
    assert all(h.history_user == bob for h in history)
    ep.refresh_from_db()
    assert ep.n_codings == 1


def test_a_stale_version_is_a_409_with_the_current_values(as_user, bob, study, make_episode):
    ep = make_episode(study)
    client = as_user(bob)
    client.post(URL, _body(ep), format="json")
    client.post(URL, _body(ep, stage="planning", version=1), format="json")
    stale = client.post(URL, _body(ep, stage="delivery", version=1), format="json")
    assert stale.status_code == 409
    assert stale.json()["current"]["stage"] == "planning"
    assert stale.json()["current"]["version"] == 2
    assert Coding.objects.get(episode=ep).stage.code == "planning"
    # Creating again without a version is stale too: a coding already exists.
    assert client.post(URL, _body(ep), format="json").status_code == 409


def test_unknown_codes_are_field_errors_and_write_nothing(as_user, bob, study, make_episode):
    ep = make_episode(study)
    response = as_user(bob).post(URL, _body(ep, failure_type="NOPE-99", stage="nowhere"), format="json")
    assert response.status_code == 400
    assert set(response.json()) >= {"failure_type", "stage"}
    assert not Coding.objects.exists()


def test_missing_codes_are_the_services_field_errors(as_user, bob, study, make_episode):
    ep = make_episode(study)
    response = as_user(bob).post(URL, {"episode": ep.pk, "source": "llm"}, format="json")
    assert response.status_code == 400
    assert "failure_type" in response.json() and "stage" in response.json()
    response = as_user(bob).post(URL, {"episode": ep.pk, "not_a_failure": True}, format="json")
    assert "not_a_failure_reason" in response.json()


def test_an_episode_of_another_study_does_not_exist_here(as_user, bob, study, other_study, make_episode):
    theirs = make_episode(other_study)
    response = as_user(bob).post(URL, _body(theirs), format="json")
    assert response.status_code == 400 and "episode" in response.json()
    assert not Coding.objects.exists()


def test_a_session_login_works_and_keeps_csrf(client, bob, study, make_episode):
    from rest_framework.test import APIClient

    ep = make_episode(study)
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(bob)
    assert api.get(URL).status_code == 200
    assert api.post(URL, _body(ep), format="json").status_code == 403  # no CSRF token
    assert not Coding.objects.exists()
