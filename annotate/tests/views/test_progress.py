"""Progress on the study page: per-coder counts today and in total, and episodes by number of codings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Coding


@pytest.fixture
def coded(study, alice, bob, make_episode, codes):
    values = CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                          stage=codes.stage("setup"), capability=codes.capability("memory"))  # fmt: skip
    episodes = [make_episode(study) for _ in range(4)]
    for ep in episodes[:3]:
        coding_save(episode=ep, coder=bob, values=values, version=None)
    coding_save(episode=episodes[0], coder=alice, values=values, version=None)
    # One of Bob's codings is from last week.
    Coding.objects.filter(coder=bob, episode=episodes[2]).update(created_at=timezone.now() - timedelta(days=7))
    return episodes


def test_the_owner_sees_every_coders_counts_and_the_buckets(client, alice, coded):
    client.force_login(alice)
    progress = client.get("/studies/alpha/").context["progress"]
    counts = {c.username: (c.today, c.total) for c in progress.coders}
    assert counts == {"alice": (1, 1), "bob": (2, 3)}
    assert progress.buckets == [("0", 1), ("1", 2), ("2", 1)]


def test_a_coder_sees_only_their_own_progress(client, bob, coded):
    client.force_login(bob)
    response = client.get("/studies/alpha/")
    progress = response.context["progress"]
    assert [c.username for c in progress.coders] == ["bob"]
    html = response.content.decode()
    assert "You have coded <strong>2</strong> episodes today and <strong>3</strong> in total" in html
    assert "Code next episode" in html and 'href="/studies/alpha/adjudicate/"' not in html
