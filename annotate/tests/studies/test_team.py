"""Starting a study in the browser, invitations, roles and removal, password pages, logging out everywhere."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile

from conftest import CODEBOOK, PASSWORD

GITHUB_FILE = json.dumps(
    [
        {
            "number": 1,
            "title": "Agent loops",
            "body": "It loops.",
            "state": "open",
            "labels": [],
            "html_url": "https://github.com/acme/agent/issues/1",
        }
    ]
).encode()


def _new_study(client, cb, **extra):
    data = {"name": "Beta", "slug": "beta", "codebook": cb.pk, "coders_per_episode": 3, "blind": "on",
            "queue_order": "import", **extra}  # fmt: skip
    return client.post("/new-study/", data)


@pytest.fixture
def staff(alice):
    alice.is_staff = True
    alice.save()
    return alice


@pytest.mark.usefixtures("eager_jobs")
def test_it_lets_staff_create_a_study_they_own_with_its_settings_and_first_import(
    client, staff, codebook, django_capture_on_commit_callbacks
):
    from annotate.models import Document, Study

    client.force_login(staff)
    assert "New study" in client.get("/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = _new_study(client, codebook, files=[SimpleUploadedFile("issues.json", GITHUB_FILE)])
    assert response.status_code == 302 and response.url == "/studies/beta/"
    study = Study.objects.get(slug="beta")
    assert (study.coders_per_episode, study.blind, study.queue_order) == (3, True, "import")
    assert study.memberships.get(user=staff).role == "owner"
    assert study.jobs.get(kind="import").status == "success"  # eager Celery: the import job ran
    assert Document.objects.filter(study=study).count() == 1


def test_it_refuses_non_staff_by_default_and_allows_anyone_when_configured(client, bob, codebook, settings):
    client.force_login(bob)
    assert "New study" not in client.get("/").content.decode()
    assert client.get("/new-study/").status_code == 403
    assert _new_study(client, codebook).status_code == 403
    settings.FAULTLINE_STUDY_CREATORS = "any"
    assert _new_study(client, codebook).status_code == 302


def test_it_validates_an_uploaded_codebook_like_load_codebook_and_writes_nothing(client, staff, codebook):
    from annotate.models import Study

    data = json.loads(CODEBOOK.read_text())
    data["version"] = "9.9"
    data["types"][0]["category"] = "no-such-category"
    client.force_login(staff)
    bad = SimpleUploadedFile("cb.json", json.dumps(data).encode())
    response = _new_study(client, codebook, codebook="", codebook_file=bad)
    assert response.status_code == 400
    assert "no-such-category" in response.content.decode()
    assert not Study.objects.filter(slug="beta").exists()
    broken = SimpleUploadedFile("cb.json", b'{"name": ')
    assert "Invalid JSON at line 1" in _new_study(client, codebook, codebook="", codebook_file=broken).content.decode()


def test_it_loads_and_publishes_an_uploaded_codebook(client, staff, codebook):
    from annotate.models import Study

    data = json.loads(CODEBOOK.read_text())
    data["version"] = "9.9"
    client.force_login(staff)
    response = _new_study(
        client, codebook, codebook="", codebook_file=SimpleUploadedFile("cb.json", json.dumps(data).encode())
    )
    assert response.status_code == 302
    study = Study.objects.get(slug="beta")
    assert study.codebook.version == "9.9" and study.codebook.is_published


def test_a_bad_import_file_leaves_no_study(client, staff, codebook):
    from annotate.models import Study

    client.force_login(staff)
    response = _new_study(client, codebook, files=[SimpleUploadedFile("notes.txt", b"hello")])
    assert response.status_code == 400
    assert "not a supported file" in response.content.decode()
    assert not Study.objects.filter(slug="beta").exists()


def test_a_taken_slug_is_a_field_error(client, staff, codebook, study):
    client.force_login(staff)
    response = _new_study(client, codebook, slug="alpha")
    assert response.status_code == 400 and "already exists" in response.content.decode()


def _invite(client, who, role=None):
    data = {"who": who} if role is None else {"who": who, "role": role}
    return client.post("/studies/alpha/members/", data)


def _link(response) -> str:
    return re.search(r'value="(http://testserver(/invite/[^"]+))"', response.content.decode()).group(2)


def test_an_invitation_link_creates_an_account_that_joins_as_coder_once(client, alice, study, django_user_model):
    client.force_login(alice)
    response = _invite(client, "dora")
    assert response.status_code == 201
    link = _link(response)
    invitation = study.invitations.get()
    assert invitation.role == "coder" and invitation.username_hint == "dora"
    assert link.split("/")[2] not in invitation.token_hash  # only the hash is stored
    client.logout()
    page = client.get(link)
    assert page.status_code == 200 and 'value="dora"' in page.content.decode()
    response = client.post(link, {"username": "dora", "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302 and response.url == "/studies/alpha/"
    dora = django_user_model.objects.get(username="dora")
    assert study.memberships.get(user=dora).role == "coder"
    assert client.get("/studies/alpha/").status_code == 200  # logged in
    client.logout()
    again = client.post(link, {"username": "dora2", "password1": PASSWORD, "password2": PASSWORD})
    assert again.status_code == 410 and "already been used" in again.content.decode()
    assert not django_user_model.objects.filter(username="dora2").exists()


def test_an_invitation_expires_after_the_configured_days(client, alice, study, settings, django_user_model):
    from annotate.models import Invitation

    settings.FAULTLINE_INVITE_DAYS = 3
    client.force_login(alice)
    link = _link(_invite(client, "erin@example.org"))
    invitation = Invitation.objects.get()
    assert timedelta(days=2, hours=23) < invitation.expires_at - invitation.created_at <= timedelta(days=3)
    Invitation.objects.update(expires_at=invitation.created_at)
    client.logout()
    response = client.post(link, {"username": "erin", "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 410 and "expired" in response.content.decode()
    assert not django_user_model.objects.filter(username="erin").exists()


def test_an_email_invitation_is_mailed_when_a_backend_is_configured(
    client, alice, study, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = _invite(client, "frank@example.org", role="viewer")
    link = _link(response)
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["frank@example.org"]
    assert "http://testserver" + link in mail.outbox[0].body
    assert "emailed to frank@example.org" in response.content.decode()


def test_no_mail_is_sent_without_a_backend(client, alice, study, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
    client.force_login(alice)
    response = _invite(client, "frank@example.org")
    assert "Copy it and send it yourself" in response.content.decode()


def test_a_known_user_joins_at_once_by_username_or_email(client, alice, study, charlie):
    client.force_login(alice)
    assert _invite(client, "charlie@example.org").status_code == 302
    assert study.memberships.get(user=charlie).role == "coder"
    assert not study.invitations.exists()


def test_a_bad_password_or_taken_username_is_a_field_error(client, alice, study, bob):
    client.force_login(alice)
    link = _link(_invite(client, "gina"))
    client.logout()
    short = client.post(link, {"username": "gina", "password1": "abc", "password2": "abc"})
    assert short.status_code == 400 and "too short" in short.content.decode()
    taken = client.post(link, {"username": "BOB", "password1": PASSWORD, "password2": PASSWORD})
    assert taken.status_code == 400 and "taken" in taken.content.decode()
    assert study.invitations.get().accepted_at is None


def test_a_withdrawn_invitation_no_longer_works(client, alice, study):
    client.force_login(alice)
    link = _link(_invite(client, "hal"))
    invitation = study.invitations.get()
    assert client.post(f"/studies/alpha/invitations/{invitation.pk}/revoke/").status_code == 302
    client.logout()
    assert client.get(link).status_code == 410


@pytest.mark.parametrize("persona", ["bob", "vera"])
def test_only_owners_invite_or_change_members(client, request, persona, study):
    client.force_login(request.getfixturevalue(persona))
    own = study.memberships.get(user__username=persona)
    assert _invite(client, "x@example.org").status_code == 403
    assert client.post(f"/studies/alpha/members/{own.pk}/", {"role": "owner"}).status_code == 403
    assert client.post(f"/studies/alpha/members/{own.pk}/remove/").status_code == 403
    assert not study.invitations.exists()


def test_the_owner_changes_a_role_and_the_adjudicator_duty(client, alice, bob, study):
    client.force_login(alice)
    membership = study.memberships.get(user=bob)
    client.post(f"/studies/alpha/members/{membership.pk}/", {"role": "coder", "adjudicator": "on"})
    membership.refresh_from_db()
    assert membership.role == "coder" and membership.adjudicator
    client.post(f"/studies/alpha/members/{membership.pk}/", {"role": "viewer"})
    membership.refresh_from_db()
    assert membership.role == "viewer" and not membership.adjudicator


def test_a_removed_coder_keeps_their_codings_attributed_and_loses_access(
    client, alice, bob, study, make_episode, codes
):
    from annotate.coding.queue import lease_claim
    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import Coding, Lease

    ep, other = make_episode(study), make_episode(study)
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"),
        stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=ep, coder=bob, values=values, version=None)
    lease_claim(episode=other, coder=bob)
    client.force_login(alice)
    membership = study.memberships.get(user=bob)
    response = client.post(f"/studies/alpha/members/{membership.pk}/remove/", follow=True)
    assert "their codings stay" in response.content.decode()
    assert not study.memberships.filter(user=bob).exists()
    assert Coding.objects.get(episode=ep).coder == bob
    assert not Lease.objects.filter(coder=bob).exists()
    assert (
        f"/studies/alpha/episodes/{ep.pk}/"
        and "bob" in client.get(f"/studies/alpha/episodes/{ep.pk}/").content.decode()
    )
    client.force_login(bob)
    assert client.get("/studies/alpha/").status_code == 404


def test_the_last_owner_cannot_be_removed(client, alice, study):
    client.force_login(alice)
    own = study.memberships.get(user=alice)
    client.post(f"/studies/alpha/members/{own.pk}/remove/")
    assert study.memberships.filter(user=alice, role="owner").exists()


def test_the_password_change_and_reset_pages_work(client, bob):
    client.force_login(bob)
    response = client.post("/account/password/", {"old_password": PASSWORD, "new_password1": "a much newer passphrase",
                                                   "new_password2": "a much newer passphrase"})  # fmt: skip
    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.check_password("a much newer passphrase")
    client.logout()
    assert client.post("/account/password/reset/", {"email": "bob@example.org"}).status_code == 302
    assert len(mail.outbox) == 1
    link = re.search(r"http://testserver(/account/password/reset/\S+)", mail.outbox[0].body).group(1)
    form = client.get(link, follow=True)
    assert form.status_code == 200 and form.context["validlink"]
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": "third passphrase here", "new_password2": "third passphrase here"}
    )
    assert done.status_code == 302
    bob.refresh_from_db()
    assert bob.check_password("third passphrase here")


def test_log_out_everywhere_ends_every_session_and_revokes_tokens(client, bob, study):
    from django.test import Client

    from annotate.models import ApiToken
    from annotate.studies.tokens import token_create

    _, key = token_create(user=bob, name="script")
    other = Client()
    other.force_login(bob)
    client.force_login(bob)
    assert client.post("/account/", {"password": "wrong"}).status_code == 400
    assert other.get("/studies/alpha/").status_code == 200
    response = client.post("/account/", {"password": PASSWORD})
    assert response.status_code == 302 and response.url == "/login/"
    assert other.get("/studies/alpha/").status_code == 302  # the other browser is logged out
    assert client.get("/studies/alpha/").status_code == 302
    assert ApiToken.objects.get(user=bob).revoked_at is not None
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/studies/").status_code == 401
    bob.refresh_from_db()
    assert bob.check_password(PASSWORD)


def test_the_favicon_answers_without_a_login(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.url.endswith("favicon.svg")
