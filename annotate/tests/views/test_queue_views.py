"""The queue pages: "next episode", "skip" and the empty queue."""

from __future__ import annotations

from annotate.models import Lease


def test_next_redirects_to_the_coding_page_of_a_leased_episode(client, bob, study, make_episode):
    ep = make_episode(study)
    client.force_login(bob)
    response = client.post("/studies/alpha/next/")
    assert response.status_code == 302 and response.url == f"/studies/alpha/episodes/{ep.pk}/code/"
    assert Lease.objects.filter(coder=bob, episode=ep).exists()
    # A GET claims nothing: it returns to the episode held, or offers the button.
    assert client.get("/studies/alpha/next/").url == f"/studies/alpha/episodes/{ep.pk}/code/"
    assert Lease.objects.count() == 1


def test_skip_gives_the_episode_back_and_moves_on(client, bob, study, make_episode):
    study.queue_order = "import"
    study.save()
    a, b = make_episode(study), make_episode(study)
    client.force_login(bob)
    client.post("/studies/alpha/next/")
    response = client.post(f"/studies/alpha/episodes/{a.pk}/skip/")
    assert response.status_code == 302 and response.url == f"/studies/alpha/episodes/{b.pk}/code/"
    assert not Lease.objects.filter(episode=a).exists() and Lease.objects.filter(episode=b, coder=bob).exists()
    response = client.post(f"/studies/alpha/episodes/{b.pk}/skip/", HTTP_HX_REQUEST="true")
    # Both skipped: rather than an empty queue, the skipped episodes come round again.
    assert response["HX-Redirect"] == f"/studies/alpha/episodes/{a.pk}/code/"


def test_an_empty_queue_says_so_and_shows_progress(client, bob, study):
    client.force_login(bob)
    response = client.post("/studies/alpha/next/")
    assert response.status_code == 200
    assert "Nothing left for you to code" in response.content.decode() and response.context["progress"]
    assert "Code the next episode" in client.get("/studies/alpha/next/").content.decode()


def test_skip_requires_post(client, bob, study, make_episode):
    ep = make_episode(study)
    client.force_login(bob)
    assert client.get(f"/studies/alpha/episodes/{ep.pk}/skip/").status_code == 405
