from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def as_user():
    """An APIClient authenticated with a fresh API token of `user` (the real token path)."""
    from annotate.studies.tokens import token_create

    def make(user) -> APIClient:
        _, key = token_create(user=user, name=f"test {user.username}")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make


@pytest.fixture
def coded(study, bob, alice, make_episode, codes):
    """Two episodes of alpha: one coded by Bob and Alice alike, one uncoded literature record."""
    from annotate.coding.services import CodingValues, coding_save

    ep = make_episode(study)
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=ep, coder=bob, values=values, version=None)
    coding_save(episode=ep, coder=alice, values=values, version=None)
    other = make_episode(study, kind="literature", cluster="smith2024")
    return ep, other


@pytest.fixture
def charlies_rows(other_study, charlie, make_episode, codes):
    """A coded episode in Charlie's study that nobody else may ever see."""
    from annotate.coding.services import CodingValues, coding_save

    ep = make_episode(other_study, cluster="secret/repo", title="Charlie's secret incident")
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=ep, coder=charlie, values=values, version=None)
    return ep
