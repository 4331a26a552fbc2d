"""A GET changes no state: opening a coding page claims no lease; "next" and the form's first touch do."""

from __future__ import annotations

from annotate.models import Lease


def test_opening_a_coding_page_claims_no_place(client, study, make_episode, bob, alice):
    episode = make_episode(study)
    for user in (alice, bob):  # an owner only looking, and a coder
        client.force_login(user)
        assert client.get(f"/studies/alpha/episodes/{episode.pk}/code/").status_code == 200
        assert client.get("/studies/alpha/next/").status_code == 200  # offers the button, claims nothing
    assert not Lease.objects.exists()


def test_an_owner_looking_does_not_take_a_place_from_the_last_coder(client, study, make_episode, alice, bob, codes):
    from annotate.coding.services import CodingValues, coding_save

    episode = make_episode(study)
    coding_save(
        episode=episode, coder=alice, version=None,
        values=CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation")),
    )  # fmt: skip
    client.force_login(alice)
    client.get(f"/studies/alpha/episodes/{episode.pk}/")
    client.get(f"/studies/alpha/episodes/{episode.pk}/code/")
    client.force_login(bob)
    response = client.post("/studies/alpha/next/")
    assert response.status_code == 302 and response.url == f"/studies/alpha/episodes/{episode.pk}/code/"


def test_the_first_touch_of_the_form_claims_the_place_by_post(client, study, make_episode, bob, django_user_model):
    from annotate.studies.services import membership_set

    episode = make_episode(study)
    url = f"/studies/alpha/episodes/{episode.pk}/claim/"
    client.force_login(bob)
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 204
    assert Lease.objects.filter(episode=episode, coder=bob).count() == 1
    for name in ("dana", "erin"):
        user = django_user_model.objects.create_user(name, password="x")
        membership_set(study=study, user=user, role="coder")
        client.force_login(user)
        status = client.post(url).status_code
    assert status == 409  # k = 2: Bob and Dana hold the places, Erin is told so
