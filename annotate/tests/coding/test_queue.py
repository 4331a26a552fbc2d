"""The coding queue: leases, the k limit, order, splits, skips, and a fixed number of queries."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from annotate.coding.queue import episode_next, lease_claim, lease_release
from annotate.coding.services import CodingValues, EpisodeFull, coding_save
from annotate.models import Coding, Episode, EpisodeStatus, Lease
from conftest import PASSWORD


@pytest.fixture
def values(codes):
    return CodingValues(
        failure_type=codes.type("TUS-03"),
        source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )


@pytest.fixture
def coders(study, django_user_model):
    """Five more coders in Alice's study."""
    from annotate.studies.services import membership_set

    users = []
    for i in range(5):
        user = django_user_model.objects.create_user(username=f"coder{i}", password=PASSWORD)
        membership_set(study=study, user=user, role="coder")
        users.append(user)
    return users


def test_it_serves_an_uncoded_episode_and_leases_it(study, bob, make_episode):
    ep = make_episode(study)
    served = episode_next(study=study, coder=bob)
    assert served == ep
    lease = Lease.objects.get()
    assert (lease.episode_id, lease.coder_id) == (ep.pk, bob.pk)
    assert lease.expires_at > timezone.now() + timedelta(minutes=29)


def test_asking_again_returns_the_held_episode(study, bob, make_episode):
    make_episode(study)
    make_episode(study)
    first = episode_next(study=study, coder=bob)
    assert episode_next(study=study, coder=bob) == first
    assert Lease.objects.count() == 1


def test_it_never_serves_an_episode_the_coder_has_coded(study, bob, make_episode, values):
    done, todo = make_episode(study), make_episode(study)
    coding_save(episode=done, coder=bob, values=values, version=None)
    assert episode_next(study=study, coder=bob) == todo


def test_live_leases_count_towards_k(study, bob, alice, coders, make_episode):
    study.coders_per_episode = 2
    study.save()
    ep = make_episode(study)
    assert episode_next(study=study, coder=bob) == ep
    assert episode_next(study=study, coder=alice) == ep
    assert episode_next(study=study, coder=coders[0]) is None  # two live leases: full
    assert lease_claim(episode=ep, coder=coders[0]) is False


def test_expired_leases_free_their_place(study, bob, alice, coders, make_episode):
    ep = make_episode(study)
    episode_next(study=study, coder=bob)
    episode_next(study=study, coder=alice)
    Lease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert episode_next(study=study, coder=coders[0]) == ep


def test_codings_count_towards_k(study, bob, alice, coders, make_episode, values):
    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=values, version=None)
    coding_save(episode=ep, coder=alice, values=values, version=None)
    assert episode_next(study=study, coder=coders[0]) is None


def test_it_completes_started_episodes_first(study, bob, alice, make_episode, values):
    fresh = [make_episode(study) for _ in range(5)]
    started = fresh[3]
    coding_save(episode=started, coder=alice, values=values, version=None)
    assert episode_next(study=study, coder=bob) == started


def test_random_order_follows_the_stored_seed_and_import_order_the_ids(study, bob, make_episode):
    episodes = [make_episode(study) for _ in range(8)]
    by_key = min(episodes, key=lambda e: e.queue_key)
    assert episode_next(study=study, coder=bob) == by_key
    lease_release(episode=by_key, coder=bob)
    study.queue_order = "import"
    study.save()
    assert episode_next(study=study, coder=bob) == episodes[0]


def test_only_the_chosen_splits_are_served(study, bob, make_episode):
    holdout = make_episode(study, split="holdout")
    assert episode_next(study=study, coder=bob) is None
    study.queue_splits = ["primary", "holdout"]
    study.save()
    assert episode_next(study=study, coder=bob) == holdout


def test_adjudicated_episodes_are_not_served(study, bob, make_episode):
    ep = make_episode(study)
    Episode.objects.filter(pk=ep.pk).update(status=EpisodeStatus.ADJUDICATED)
    assert episode_next(study=study, coder=bob) is None


def test_skip_releases_the_lease_and_serves_the_episode_again_only_when_nothing_else_is_left(study, bob, make_episode):
    study.queue_order = "import"
    study.save()
    a, b = make_episode(study), make_episode(study)
    assert episode_next(study=study, coder=bob) == a
    assert lease_release(episode=a, coder=bob) == 1
    assert not Lease.objects.exists()
    assert episode_next(study=study, coder=bob, skipped=[a.pk]) == b
    lease_release(episode=b, coder=bob)
    assert episode_next(study=study, coder=bob, skipped=[b.pk, a.pk]) == a  # nothing else left


def test_taking_a_new_episode_drops_the_coders_other_lease(study, bob, make_episode):
    a, b = make_episode(study), make_episode(study)
    lease_claim(episode=a, coder=bob)
    lease_claim(episode=b, coder=bob)
    assert list(Lease.objects.values_list("episode_id", flat=True)) == [b.pk]


def test_the_window_falls_back_to_a_full_scan(study, bob, alice, make_episode, values, monkeypatch):
    import annotate.coding.queue as queue

    monkeypatch.setattr(queue, "WINDOWS", (1, 2))
    study.queue_order = "import"
    study.save()
    episodes = [make_episode(study) for _ in range(5)]
    for ep in episodes[:4]:
        coding_save(episode=ep, coder=bob, values=values, version=None)
    # Bob's four codings fill the heads of the 1-coding slice; the one free episode lies past the window.
    assert episode_next(study=study, coder=bob) == episodes[4]
    assert episode_next(study=study, coder=alice) == episodes[0]


def test_the_small_window_widens_before_a_full_scan(
    study, bob, make_episode, values, monkeypatch, django_assert_max_num_queries
):
    import annotate.coding.queue as queue

    monkeypatch.setattr(queue, "WINDOWS", (2, 4))
    scans = []
    monkeypatch.setattr(queue, "_scan", lambda *a: scans.append(a) or [])
    study.queue_order = "import"
    study.save()
    episodes = [make_episode(study) for _ in range(4)]
    for ep in episodes[:3]:
        coding_save(episode=ep, coder=bob, values=values, version=None)
    # Bob's codings fill the 2-wide heads; the 4-wide window finds the free episode without a scan.
    assert episode_next(study=study, coder=bob) == episodes[3] and scans == []


def test_renewing_a_held_lease_takes_no_row_lock(study, bob, make_episode, django_assert_num_queries):
    ep = make_episode(study)
    assert episode_next(study=study, coder=bob) == ep
    before = Lease.objects.get().expires_at
    with django_assert_num_queries(1) as queries:
        assert lease_claim(episode=ep, coder=bob)
    sql = [q["sql"] for q in queries.captured_queries]
    assert sum(s.startswith("UPDATE") for s in sql) == 1 and not any("FOR UPDATE" in s for s in sql)
    assert Lease.objects.get().expires_at >= before


def test_a_first_coding_needs_a_place(study, bob, alice, coders, make_episode, values):
    ep = make_episode(study)
    lease_claim(episode=ep, coder=bob)
    lease_claim(episode=ep, coder=alice)
    with pytest.raises(EpisodeFull):
        coding_save(episode=ep, coder=coders[0], values=values, version=None)
    assert not Coding.objects.exists()
    coding_save(episode=ep, coder=bob, values=values, version=None)
    assert not Lease.objects.filter(coder=bob).exists()  # the save ends the lease
    ep.refresh_from_db()
    assert ep.n_codings == 1


def test_a_second_submit_of_a_first_coding_is_a_conflict_not_a_full_episode(study, bob, alice, make_episode, values):
    from annotate.coding.services import CodingConflict

    ep = make_episode(study)
    lease_claim(episode=ep, coder=bob)
    coding_save(episode=ep, coder=bob, values=values, version=None, has_coding=False)
    lease_claim(episode=ep, coder=alice)  # bob's coding and alice's lease fill k = 2
    # The page was read before the first save landed, so it still says "no coding yet".
    with pytest.raises(CodingConflict):
        coding_save(episode=ep, coder=bob, values=values, version=None, has_coding=False)
    assert Coding.objects.filter(episode=ep).count() == 1


def test_a_stale_no_coding_yet_with_room_left_still_meets_the_version_check(study, bob, make_episode, values):
    """Under the lock the save looks again for the coder's coding (on PostgreSQL in the same statement that
    counts the places): a page that still says "no coding yet" gets a conflict, or edits with the version."""
    from annotate.coding.services import CodingConflict

    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=values, version=None, has_coding=False)
    with pytest.raises(CodingConflict) as conflict:
        coding_save(episode=ep, coder=bob, values=values, version=None, has_coding=False)
    assert conflict.value.current.version == 1
    memo = CodingValues(**{**values.__dict__, "memo": "edited from a stale page"})
    assert coding_save(episode=ep, coder=bob, values=memo, version=1, has_coding=False).version == 2
    assert Coding.objects.filter(episode=ep).count() == 1
    ep.refresh_from_db()
    assert ep.n_codings == 1


def test_editing_an_existing_coding_needs_no_place(study, bob, alice, coders, make_episode, values):
    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=values, version=None)
    lease_claim(episode=ep, coder=alice)
    lease_claim(episode=ep, coder=coders[0])  # no room: bob's coding and alice's lease
    edited = coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": "again"}), version=1)
    assert edited.version == 2


def test_an_adjudicated_episode_takes_no_new_coding(study, bob, make_episode, values):
    ep = make_episode(study)
    Episode.objects.filter(pk=ep.pk).update(status=EpisodeStatus.ADJUDICATED)
    with pytest.raises(EpisodeFull, match="adjudicated"):
        coding_save(episode=ep, coder=bob, values=values, version=None)


@pytest.mark.parametrize("n", [5, 60])
def test_next_costs_the_same_queries_whatever_the_study_size(
    study, bob, alice, make_episode, values, django_assert_num_queries, n
):
    from annotate.models import Document

    docs = Document.objects.bulk_create(
        Document(study=study, kind="github_issue", external_id=f"x#{i}", cluster="x", title=f"t{i}") for i in range(n)
    )
    Episode.objects.bulk_create(Episode(document=d, study=study, queue_key=(i * 7919) % n) for i, d in enumerate(docs))
    for ep in Episode.objects.all()[: n // 5]:
        coding_save(episode=ep, coder=alice, values=values, version=None)
    # resume check, the k window heads (one UNION ALL where the database allows it), own codings and
    # others' leases among them (one UNION ALL), then the claim in its own savepoint: lock, re-count,
    # the coder's old leases (none to drop here), insert, release
    heads = 1 if connection.features.supports_slicing_ordering_in_compound else study.coders_per_episode
    with django_assert_num_queries(8 + heads):
        assert episode_next(study=study, coder=bob) is not None
    with django_assert_num_queries(2):  # the held lease comes back (find it, renew it)
        assert episode_next(study=study, coder=bob) is not None


# ---------------------------------------------------------------- concurrency (PostgreSQL)


def _run_threads(target, args_list):
    barrier = threading.Barrier(len(args_list))
    errors = []

    def wrapped(*args):
        try:
            barrier.wait()
            target(*args)
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrapped, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_next_never_leases_an_episode_beyond_k(require_postgres, study, coders, bob, alice, make_episode):
    episodes = [make_episode(study) for _ in range(3)]
    everyone = [bob, alice, *coders]  # 7 coders, room for 6 (3 episodes x k=2)
    served = {}

    def ask(user):
        episode = episode_next(study=study, coder=user)
        served[user.pk] = episode.pk if episode else None

    _run_threads(ask, [(u,) for u in everyone])
    per_episode = Counter(Lease.objects.values_list("episode_id", flat=True))
    assert all(n <= 2 for n in per_episode.values()), per_episode
    assert sum(per_episode.values()) == 6
    assert sorted(per_episode) == sorted(e.pk for e in episodes)
    assert list(served.values()).count(None) == 1


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_coders_never_push_an_episode_past_k(
    require_postgres, study, coders, bob, alice, make_episode, values
):
    episodes = [make_episode(study) for _ in range(6)]
    everyone = [bob, alice, *coders]

    def work(user):
        for _ in range(10):
            episode = episode_next(study=study, coder=user)
            if episode is None:
                return
            coding_save(episode=episode, coder=user, values=values, version=None)

    _run_threads(work, [(u,) for u in everyone])
    per_episode = Counter(Coding.objects.values_list("episode_id", flat=True))
    assert per_episode == {e.pk: 2 for e in episodes}  # every episode complete, none beyond k
    assert set(Episode.objects.values_list("n_codings", flat=True)) == {2}
    assert not Lease.objects.exists()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_first_codings_of_one_coder_give_one_coding_and_conflicts(
    require_postgres, study, bob, make_episode, values
):
    from annotate.coding.services import CodingConflict

    ep = make_episode(study)
    outcomes = []

    def first_coding(memo):
        try:
            coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": memo}), version=None)
            outcomes.append("saved")
        except CodingConflict:
            outcomes.append("conflict")

    # Two tabs and an API client at once: the episode's row lock orders them, the first one wins.
    _run_threads(first_coding, [(f"tab {i}",) for i in range(3)])
    assert sorted(outcomes) == ["conflict", "conflict", "saved"]
    assert Coding.objects.filter(episode=ep).count() == 1
    ep.refresh_from_db()
    assert ep.n_codings == 1
