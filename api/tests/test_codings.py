"""Saving codings through the API: the UI's service, optimistic locking, field errors and history."""

from __future__ import annotations

from django.db import connection

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


def test_a_save_costs_a_fixed_number_of_queries(as_user, bob, study, make_episode, django_assert_num_queries):
    from datetime import timedelta

    from django.utils import timezone

    from annotate.coding.selectors import codebook_picker
    from annotate.models import Lease

    first, second = make_episode(study), make_episode(study)
    codebook_picker(study.codebook)  # the codes are looked up in the published codebook's cached picker
    client = as_user(bob)
    assert client.get(URL).status_code == 200  # the token's last use is stamped (at most once a minute)
    # token, membership, the episode with whether bob coded it; savepoint, lock the episode, end bob's
    # live lease (none), others' live leases and bob's expired ones in one count, the coding (for its
    # version), insert coding + history, count and update the episode in one statement, bump the study's
    # data version (stored analyses go stale), release.
    # PostgreSQL ends the lease, counts and looks for the coding in one statement: two fewer.
    first_save = 11 if connection.vendor == "postgresql" else 13
    with django_assert_num_queries(first_save):
        assert client.post(URL, _body(first), format="json").status_code == 201
    # an expired lease of bob's is ended with the save: one DELETE more
    Lease.objects.create(episode=second, coder=bob, expires_at=timezone.now() - timedelta(minutes=1))
    with django_assert_num_queries(first_save + 1):
        assert client.post(URL, _body(second), format="json").status_code == 201
    assert not Lease.objects.exists()
    # an edit takes no episode lock: savepoint, the coding, update it + history, the episode's
    # disagreement state, the study's data version, end any stray lease, release
    with django_assert_num_queries(11):
        assert client.post(URL, _body(first, stage="planning", version=1), format="json").status_code == 200


def test_the_coding_representation_is_drfs_own_for_every_field(as_user, bob, alice, study, make_episode, codes):
    """CodingSerializer reads its fields straight off the coding, for speed; it must say exactly what DRF's
    field-by-field walk says, for full codings, 'not a failure', evidence offsets and trace attributions."""
    from rest_framework import serializers

    from annotate.coding.services import CodingValues, coding_save
    from api.serializers.core import CodingSerializer

    client = as_user(bob)
    full = make_episode(study)
    saved = client.post(URL, _body(full, memo="m\u00e9mo", evidence="", confidence="low"), format="json")
    assert saved.status_code == 201
    none = make_episode(study)
    coding_save(episode=none, coder=alice, version=None,
                values=CodingValues(not_a_failure=True, not_a_failure_reason="a feature request"))  # fmt: skip
    traced = make_episode(study)
    coding_save(episode=traced, coder=alice, version=None, values=CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"), evidence_start=None, decisive_step=None, responsible_agent="",
    ))  # fmt: skip
    codings = list(Coding.objects.order_by("pk"))
    assert len(codings) == 3
    # Every field set, in memory (the representation needs no validation): offsets, a step, a suggestion id.
    from datetime import datetime, timedelta, timezone

    at = datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    every = Coding(pk=99, episode=full, coder=bob, failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                   stage=codes.stage("planning"), capability=codes.capability("actuation"), not_a_failure=False,
                   needs_new_type=True, confidence="high", memo="a\nb", evidence="quoted", evidence_start=3,
                   evidence_end=9, decisive_step=4, responsible_agent="Planner", from_suggestion_id=7, version=5,
                   created_at=at, updated_at=at + timedelta(days=1))  # fmt: skip
    codings.append(every)
    for coding in codings:
        serializer = CodingSerializer(coding)
        drf = serializers.ModelSerializer.to_representation(serializer, coding)
        assert serializer.data == drf
        assert list(serializer.data) == list(drf)  # the same keys in the same order
    many = CodingSerializer(codings, many=True).data
    assert [dict(x) for x in many] == [serializers.ModelSerializer.to_representation(CodingSerializer(c), c)
                                       for c in codings]  # fmt: skip
    assert CodingSerializer(every).data["created_at"] == "2026-05-01T10:30:15.123456Z"
