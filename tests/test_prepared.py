"""lib.db.prepared: a lookup compiled once answers exactly what its queryset answers, on either database."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from lib.db.prepared import Prepared


def _same(got, want, path="row") -> None:
    """Two model instances alike: class, fields, annotations, state and select_related objects, all the way down."""
    assert type(got) is type(want), path
    fields = {k: v for k, v in got.__dict__.items() if k != "_state"}
    assert fields == {k: v for k, v in want.__dict__.items() if k != "_state"}, path
    assert {k: type(v) for k, v in fields.items()} == {k: type(v) for k, v in want.__dict__.items() if k != "_state"}
    assert (got._state.db, got._state.adding) == (want._state.db, want._state.adding), path
    assert got._state.fields_cache.keys() == want._state.fields_cache.keys(), path
    for name, related in want._state.fields_cache.items():
        _same(got._state.fields_cache[name], related, f"{path}.{name}")


def test_the_membership_lookup_is_its_querysets(study, other_study, bob, charlie, alice):
    from annotate.models import Membership
    from annotate.studies.access import _MEMBERSHIP

    for user, slug in ((bob, "alpha"), (alice, "alpha"), (charlie, "charlies"), (charlie, "alpha"), (bob, "nope")):
        want = list(
            Membership.objects.select_related("study", "study__codebook").filter(study__slug=slug, user=user)[:1]
        )
        got = _MEMBERSHIP.all(slug=slug, user_id=user.pk)
        assert len(got) == len(want) == (0 if (user, slug) in ((charlie, "alpha"), (bob, "nope")) else 1)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
            assert g.study.codebook.pk == study.codebook_id  # the chain is populated, not fetched again


def test_the_token_lookup_is_its_querysets(bob, django_assert_num_queries):
    from django.utils import timezone

    from annotate.models import ApiToken
    from annotate.studies.tokens import token_create
    from api.authentication import _LIVE_TOKEN, hash_key, live_token

    _, key = token_create(user=bob, name="live")
    token, revoked_key = token_create(user=bob, name="revoked")
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    for k in (key, revoked_key, "no such key"):
        want = list(ApiToken.objects.select_related("user").filter(key_hash=hash_key(k), revoked_at__isnull=True)[:1])
        got = _LIVE_TOKEN.all(key_hash=hash_key(k))
        assert len(got) == len(want) == (1 if k == key else 0)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    with django_assert_num_queries(1):  # the user comes with the token
        assert live_token(key).user.username == "bob"
    bob.is_active = False
    bob.save()
    assert live_token(key) is None


def test_the_episode_lookup_is_its_querysets_with_and_without_a_coding(study, bob, alice, make_episode, codes):
    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import Coding, Episode
    from api.serializers.core import _EPISODE_WITH_MINE

    coded, uncoded = make_episode(study), make_episode(study)
    Episode.objects.filter(pk=coded.pk).update(reference={"labels": ["x"], "n": 2})
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=coded, coder=bob, values=values, version=None)
    for episode in (coded, uncoded):
        for coder in (bob, alice):
            want = (
                Episode.objects.filter(study=study)
                .annotate(has_mine=Exists(Coding.objects.filter(episode=OuterRef("pk"), coder=coder)))
                .get(pk=episode.pk)
            )
            got = _EPISODE_WITH_MINE.first(study_id=study.pk, pk=episode.pk, coder_id=coder.pk)
            _same(got, want)
            assert got.has_mine is (episode == coded and coder == bob)
    assert _EPISODE_WITH_MINE.first(study_id=study.pk + 1, pk=coded.pk, coder_id=bob.pk) is None  # another study's
    assert _EPISODE_WITH_MINE.first(study_id=study.pk, pk=uncoded.pk, coder_id=bob.pk).reference == {}


def test_an_episode_id_past_64_bits_is_a_field_error_not_a_crash(study, bob, make_episode):
    from rest_framework.test import APIClient

    from annotate.studies.tokens import token_create

    make_episode(study)
    _, key = token_create(user=bob, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    cases = ((2**63, "does_not_exist"), (10**30, "does_not_exist"), ("12a", "invalid"), (True, "invalid"))
    for episode, error in cases:
        response = client.post("/api/v1/studies/alpha/codings/", {"episode": episode}, format="json")
        assert response.status_code == 400, (episode, response.content)
        assert response.json()["episode"][0] == (
            f"Object with pk={episode} does not exist." if error == "does_not_exist" else "Invalid value."
        )


def test_a_lookup_that_rewrites_its_value_is_refused_when_first_run(db):
    from annotate.models import Study

    contains = Prepared(lambda name: Study.objects.filter(name__icontains=name), name=str)
    with pytest.raises(ImproperlyConfigured, match="must reach the SQL unchanged"):
        contains.all(name="x")
    with pytest.raises(ImproperlyConfigured, match="plain model queryset"):
        Prepared(lambda pk: Study.objects.filter(pk=pk).values("slug"), pk=int).all(pk=1)
    with pytest.raises(ImproperlyConfigured, match="only int, str and datetime"):
        Prepared(lambda when: Study.objects.filter(created_at=when), when=object)
    day = Prepared(lambda when: Study.objects.filter(created_at__date=when), when=datetime)  # a date, not a datetime
    with pytest.raises(ImproperlyConfigured, match="must reach the SQL unchanged"):
        day.all(when=timezone.now())


def test_a_value_used_twice_is_swapped_in_everywhere(study, other_study):
    from annotate.models import Study

    between = Prepared(lambda pk: Study.objects.filter(pk__gte=pk, pk__lte=pk), pk=int)  # either left out: no row
    for s in (study, other_study):
        assert between.all(pk=s.pk) == [s]


def test_a_datetime_is_sent_as_the_orm_sends_it(study, bob, alice, make_episode):
    from datetime import timedelta

    from annotate.models import Lease

    episode = make_episode(study)
    now = timezone.now()
    Lease.objects.create(episode=episode, coder=bob, expires_at=now + timedelta(seconds=30))
    Lease.objects.create(episode=episode, coder=alice, expires_at=now - timedelta(seconds=30))
    live = Prepared(lambda at: Lease.objects.filter(expires_at__gt=at).order_by("pk"), at=datetime)
    for at in (now - timedelta(minutes=1), now, now + timedelta(minutes=1), now.astimezone(ZoneInfo("Asia/Kolkata"))):
        assert live.all(at=at) == list(Lease.objects.filter(expires_at__gt=at).order_by("pk")), at
    assert [lease.coder for lease in live.all(at=now)] == [bob]
    with pytest.raises(TypeError, match="must be aware"):
        live.all(at=datetime(2026, 1, 1))


def test_values_must_be_the_declared_kinds_and_all_given(study):
    from annotate.models import Study

    by_slug = Prepared(lambda slug, pk: Study.objects.filter(slug=slug, pk=pk), slug=str, pk=int)
    assert by_slug.first(slug="alpha", pk=study.pk) == study
    with pytest.raises(TypeError, match="must be int"):
        by_slug.all(slug="alpha", pk=str(study.pk))
    with pytest.raises(TypeError, match="must be int"):
        by_slug.all(slug="alpha", pk=True)
    with pytest.raises(TypeError, match="takes"):
        by_slug.all(slug="alpha")
    assert by_slug.first(slug="alpha", pk=study.pk + 1) is None


def test_the_coding_pages_episode_lookup_is_its_querysets(client, study, other_study, bob, alice, make_episode, codes):
    from django.http import Http404

    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import Coding, Episode
    from annotate.views.coding import study_episode

    def orm(pk, coder):  # the lookup as study_episode wrote it before it was prepared
        own = Coding.objects.filter(episode=OuterRef("pk"), coder=coder).values("pk")[:1]
        found = Episode.objects.select_related("document").annotate(my_coding=Subquery(own)).get(pk=pk, study=study)
        found.study = study
        return found

    coded, uncoded, theirs = make_episode(study), make_episode(study), make_episode(other_study)
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    mine = coding_save(episode=coded, coder=bob, values=values, version=None)
    for episode in (coded, uncoded):
        for coder in (bob, alice):
            got = study_episode(study, episode.pk, coder=coder)
            _same(got, orm(episode.pk, coder))
            assert got.my_coding == (mine.pk if (episode, coder) == (coded, bob) else None)
            assert got.document.body == "The agent failed."
    # The page's GET also reads whether the coder holds a live lease: none, a live one, an expired one.
    from datetime import timedelta

    from annotate.coding.queue import live_lease_of
    from annotate.models import Lease

    def orm_leased(pk, coder):
        found = orm(pk, coder)
        found.leased = Episode.objects.filter(pk=pk).filter(live_lease_of(coder)).exists()
        return found

    Lease.objects.create(episode=uncoded, coder=alice, expires_at=timezone.now() + timedelta(minutes=5))
    Lease.objects.create(episode=uncoded, coder=bob, expires_at=timezone.now() - timedelta(minutes=5))
    for episode in (coded, uncoded):
        for coder in (bob, alice):
            got = study_episode(study, episode.pk, coder=coder, lease=True)
            _same(got, orm_leased(episode.pk, coder))
            assert got.leased is ((episode, coder) == (uncoded, alice))
    for pk in (theirs.pk, 2**63, 10**30):
        for lease in (False, True):
            with pytest.raises(Http404):
                study_episode(study, pk, coder=bob, lease=lease)
    client.force_login(bob)
    for pk in (theirs.pk, 2**63):  # the page and its save: a 404, never a database error
        assert client.post(f"/studies/alpha/episodes/{pk}/code/", {"action": "save"}).status_code == 404
        assert client.get(f"/studies/alpha/episodes/{pk}/code/").status_code == 404
