"""Leases a person can see: who holds an episode and until when; an owner releases one; Back gives it back."""

from __future__ import annotations

import pytest

from annotate.coding.queue import lease_claim
from annotate.models import Lease


@pytest.fixture
def held(study, make_episode, bob):
    episode = make_episode(study)
    assert lease_claim(episode=episode, coder=bob)
    return episode


def test_the_owner_sees_who_holds_an_episode_and_until_when(client, alice, held):
    lease = Lease.objects.get(episode=held)
    client.force_login(alice)
    for url in (f"/studies/alpha/episodes/{held.pk}/", "/studies/alpha/"):
        html = client.get(url).content.decode()
        assert f'id="lease-{lease.pk}"' in html and "bob" in html
        assert f'datetime="{lease.expires_at.isoformat()}"' in html or lease.expires_at.strftime("%H:%M") in html
        assert f"/studies/alpha/leases/{lease.pk}/release/" in html


def test_a_coder_sees_only_their_own_lease_and_no_release_button(client, bob, alice, study, make_episode, held):
    other = make_episode(study)
    lease_claim(episode=other, coder=alice)
    client.force_login(bob)
    html = client.get("/studies/alpha/").content.decode()
    assert f"Episode {held.pk}</a>" in html and f"Episode {other.pk}</a>" not in html
    assert "/leases/" not in html and "Continue" in html


def test_the_owner_releases_a_lease_and_the_episode_is_back_in_the_queue(client, alice, charlie, study, held):
    from annotate.coding.queue import episode_next

    study.coders_per_episode = 1
    study.save()
    lease = Lease.objects.get(episode=held)
    assert episode_next(study=study, coder=alice, skipped=[]) is None  # bob's lease holds the only place
    client.force_login(alice)
    response = client.post(f"/studies/alpha/leases/{lease.pk}/release/", {"next": "episode", "episode": held.pk})
    assert response.status_code == 302 and response.url == f"/studies/alpha/episodes/{held.pk}/"
    assert not Lease.objects.filter(pk=lease.pk).exists()
    assert episode_next(study=study, coder=alice, skipped=[]) == held
    again = client.post(f"/studies/alpha/leases/{lease.pk}/release/", follow=True)
    assert "already ended" in again.content.decode()


def test_a_coder_cannot_release_someone_elses_lease(client, bob, alice, study, make_episode):
    episode = make_episode(study)
    lease_claim(episode=episode, coder=alice)
    lease = Lease.objects.get(episode=episode)
    client.force_login(bob)
    assert client.post(f"/studies/alpha/leases/{lease.pk}/release/").status_code == 403
    assert Lease.objects.filter(pk=lease.pk).exists()


def test_back_gives_the_coders_own_episode_back(client, bob, held):
    client.force_login(bob)
    response = client.post(f"/studies/alpha/episodes/{held.pk}/leave/", follow=True)
    assert response.redirect_chain[-1][0] == "/studies/alpha/"
    assert f"You left episode {held.pk}" in response.content.decode()
    assert not Lease.objects.filter(episode=held).exists()


def test_skip_gives_it_back_too(client, bob, held, study, make_episode):
    other = make_episode(study)
    client.force_login(bob)
    response = client.post(f"/studies/alpha/episodes/{held.pk}/skip/")
    # The skip ends the lease and claims the next episode in the same request.
    assert response.url == f"/studies/alpha/episodes/{other.pk}/code/"
    assert not Lease.objects.filter(episode=held).exists()
