"""A codebook uploaded when a study starts belongs to that study: not published to everyone, no global name."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotate.models import Study
from conftest import CODEBOOK
from taxonomy.models import Codebook
from taxonomy.services import CodebookError, codebook_load, parse_codebook_label


@pytest.fixture
def creators(settings):
    settings.FAULTLINE_STUDY_CREATORS = "any"


def _upload(client, user, slug: str, data: dict):
    client.force_login(user)
    upload = SimpleUploadedFile("cb.json", json.dumps(data).encode())
    return client.post(
        "/new-study/",
        {"name": slug.title(), "slug": slug, "codebook_file": upload, "coders_per_episode": 2, "queue_order": "random"},
    )


def _acme(description: str = "Acme's own") -> dict:
    data = json.loads(CODEBOOK.read_text())
    data.update(name="acme", version="1.0", description=description)
    return data


def test_an_uploaded_codebook_is_private_to_its_study(client, alice, charlie, creators):
    assert _upload(client, alice, "beta", _acme()).status_code == 302
    cb = Study.objects.get(slug="beta").codebook
    assert cb.private and cb.is_published  # frozen, as every codebook a study codes against
    client.force_login(charlie)
    assert "acme" not in client.get("/codebooks/").content.decode()
    assert client.get(f"/codebooks/{cb.pk}/").status_code == 404
    assert f'value="{cb.pk}"' not in client.get("/new-study/").content.decode()  # not offered to new studies
    api = APIClient()
    api.force_authenticate(charlie)
    assert all(row["name"] != "acme" for row in api.get("/api/v1/codebooks/").json()["results"])
    assert api.get(f"/api/v1/codebooks/{cb.pk}/").status_code == 404
    client.force_login(alice)
    assert client.get(f"/codebooks/{cb.pk}/").status_code == 200  # a member of the study reads it
    api.force_authenticate(alice)
    assert api.get(f"/api/v1/codebooks/{cb.pk}/").status_code == 200
    with pytest.raises(CodebookError):
        parse_codebook_label("acme@1.0")  # create_study --codebook cannot name it


def test_it_takes_no_global_name_and_leaves_a_published_one_alone(client, alice, charlie, creators):
    public = codebook_load(data=_acme("the public one"), publish=True).codebook
    assert _upload(client, alice, "beta", _acme("a different one")).status_code == 302  # no "published" clash
    assert _upload(client, charlie, "gamma", _acme("Charlie's")).status_code == 302
    mine, his = Study.objects.get(slug="beta").codebook, Study.objects.get(slug="gamma").codebook
    assert len({public.pk, mine.pk, his.pk}) == 3
    assert parse_codebook_label("acme@1.0") == public
    public.refresh_from_db()
    assert public.description == "the public one" and not public.private


def test_the_global_name_stays_free_for_a_later_load(client, alice, creators):
    assert _upload(client, alice, "beta", _acme()).status_code == 302
    loaded = codebook_load(data=_acme("published later"), publish=True)
    assert loaded.created and not loaded.codebook.private
    assert Codebook.objects.filter(name="acme", version="1.0").count() == 2
