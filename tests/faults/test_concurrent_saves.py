"""Two saves of the same coding race through real gunicorn workers: one wins, the
other gets 409 with the winner's values, and history keeps both the create and the win."""

import threading

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Coding
from tests.faults.conftest import app_env, csrf_of, logged_in

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def save(barrier, results, path, name, client, token, memo):
    data = {"csrfmiddlewaretoken": token, "failure_type": "TUS-03", "source": "llm", "stage": "planning",
            "capability": "reasoning", "confidence": "high", "memo": memo, "version": "1"}  # fmt: skip
    barrier.wait()
    results[name] = client.post(path, data=data)


def test_concurrent_saves_of_one_coding_give_one_winner_and_one_409(
    require_postgres, private_redis, processes, study, bob, make_episode, codes
):
    # Two sync workers: each of the two racing saves has one to itself (more only slow the start).
    base = processes.web(app_env(CELERY_BROKER_URL=private_redis.url), workers=2)
    first, second = logged_in(base, "bob"), logged_in(base, "bob")  # two tabs, two sessions
    for round_ in range(6):
        ep = make_episode(study)
        coding_save(
            episode=ep, coder=bob, version=None,
            values=CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                                stage=codes.stage("planning"), capability=codes.capability("reasoning")),
        )  # fmt: skip
        path = f"/studies/alpha/episodes/{ep.pk}/code/"
        tokens = [csrf_of(first, path), csrf_of(second, path)]
        barrier = threading.Barrier(2)
        results = {}
        threads = [
            threading.Thread(target=save, args=(barrier, results, path, "a", first, tokens[0], f"tab A {round_}")),
            threading.Thread(target=save, args=(barrier, results, path, "b", second, tokens[1], f"tab B {round_}")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        statuses = sorted(r.status_code for r in results.values())
        assert statuses == [302, 409], statuses
        winner = next(name for name, r in results.items() if r.status_code == 302)
        loser = results["b" if winner == "a" else "a"]
        coding = Coding.objects.get(episode=ep, coder=bob)
        assert coding.version == 2
        assert coding.memo == f"tab {winner.upper()} {round_}"
        assert coding.memo in loser.text  # the 409 shows the values that won
        assert [h.history_type for h in coding.history.order_by("history_date")] == ["+", "~"]
