"""The migration to per-coder rejections: a suggestion rejected for the whole study becomes its reviewer's own."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotate.models import Suggestion, SuggestionRejection, SuggestionStatus


@pytest.mark.django_db(transaction=True)
def test_stored_rejections_move_to_their_reviewers(study, make_episode, bob):
    ep = make_episode(study)
    rejected, pending = (
        Suggestion.objects.create(episode=ep, backend="local", model="m", prompt_version="p", cache_key=key)
        for key in ("a", "b")
    )
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    (target,) = [k for k in graph.nodes if k[0] == "annotate" and k[1].endswith("_suggestion_rejections_token_scopes")]
    (before,) = [p.key for p in graph.node_map[target].parents if p.key[0] == "annotate"]
    try:
        executor.migrate([before])
        Suggestion.objects.filter(pk=rejected.pk).update(status=SuggestionStatus.REJECTED, reviewed_by=bob)
        executor.loader.build_graph()
        executor.migrate([target])
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    rejected.refresh_from_db()
    assert rejected.status == SuggestionStatus.PENDING and rejected.reviewed_by is None
    assert list(SuggestionRejection.objects.values_list("suggestion_id", "coder_id")) == [(rejected.pk, bob.pk)]
    assert not SuggestionRejection.objects.filter(suggestion=pending).exists()
