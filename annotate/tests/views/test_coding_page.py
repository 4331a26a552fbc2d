"""The coding page: rendering, saving (plain POST and htmx), conflicts, evidence, suggestions and blinding."""

from __future__ import annotations

import pytest
from django.db import connection

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Coding, Lease, Suggestion, SuggestionStatus

BODY = (
    "The agent **looped** forever calling `search` with the same query.\n\n"
    "It never stopped.\n\n<script>alert('x')</script><img src=x onerror=alert(2)>"
)


@pytest.fixture
def episode(study, make_episode):
    return make_episode(study, body=BODY, title="Agent loops on search", cluster="acme/agent")


def post_data(**overrides):
    data = {
        "failure_type": "TUS-03",
        "source": "agent_design",
        "stage": "iterative_execution",
        "capability": "actuation",
        "confidence": "high",
        "memo": "",
        "evidence": "",
        "version": "",
        "action": "save",
    }
    data.update(overrides)
    return data


def url(ep, suffix="code/"):
    return f"/studies/alpha/episodes/{ep.pk}/{suffix}"


def test_it_shows_the_sanitised_text_with_title_link_cluster_and_the_codebook(client, bob, episode):
    client.force_login(bob)
    response = client.get(url(episode))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Agent loops on search" in html and "acme/agent" in html
    assert 'href="https://github.com/acme/agent/issues/' in html
    assert "<strong>looped</strong>" in html
    assert "<script>alert" not in html and "onerror" not in html
    assert "/coding-" in html  # the codebook's data, a script cached per version
    assert html.count('<option value="TUS-') == 6
    for name in ("source-llm", "stage-setup", "capability-actuation", "not_a_failure", "needs_new_type", "memo"):
        assert f'id="{name}"' in html
    assert 'name="from_suggestion"' in html
    assert "annotate/partials/_suggestion_panel.html" in [t.name for t in response.templates]
    assert not Lease.objects.exists()  # opening it claims nothing (a GET changes no state)
    assert f"/episodes/{episode.pk}/claim/" in html  # the form claims the place on first touch


def test_it_codes_the_excerpt_when_the_episode_has_one(client, bob, episode):
    episode.excerpt = "Only this part: the tool timed out."
    episode.save()
    client.force_login(bob)
    html = client.get(url(episode)).content.decode()
    assert "the tool timed out" in html and "looped" not in html


def test_a_plain_post_saves_and_redirects(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(memo="loop without a stop rule"))
    assert response.status_code == 302 and response.url == url(episode)
    coding = Coding.objects.get()
    assert (coding.coder, coding.failure_type.code, coding.source.code, coding.version) == (
        bob,
        "TUS-03",
        "agent_design",
        1,
    )
    assert coding.memo == "loop without a stop rule"
    assert not Lease.objects.exists()
    assert coding.history.get().history_user == bob


def test_save_and_next_goes_to_the_queue(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(action="next"))
    # The save claims the next episode in the same request; with none left, the empty queue's page.
    assert response.status_code == 302 and response.url == "/studies/alpha/next/?empty=1"
    assert "Nothing left for you to code" in client.get(response.url).content.decode()


def test_an_htmx_save_returns_the_panel_and_an_htmx_next_redirects_the_client(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(), headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="coding-panel"' in html and "<html" not in html and "Saved (version 1)" in html
    response = client.post(url(episode), post_data(action="next", version="1", memo="more"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == "/studies/alpha/next/?empty=1"
    assert Coding.objects.get().version == 2


def test_a_stale_save_gets_409_the_current_values_and_overwrites_nothing(client, bob, episode, codes):
    client.force_login(bob)
    client.post(url(episode), post_data(memo="first"))
    client.post(url(episode), post_data(memo="second", version="1"))
    response = client.post(url(episode), post_data(memo="stale", version="1", source="llm"))
    assert response.status_code == 409
    html = response.content.decode()
    assert "changed since you opened it" in html and "version 2" in html
    assert "Agent logic &amp; prompting" in html  # the current source, shown beside the form
    assert 'name="version" value="2"' in html  # saving again is a deliberate overwrite
    coding = Coding.objects.get()
    assert (coding.memo, coding.source.code, coding.version) == ("second", "agent_design", 2)


def test_a_stale_htmx_save_swaps_in_the_conflict(client, bob, episode):
    client.force_login(bob)
    client.post(url(episode), post_data())
    client.post(url(episode), post_data(version="1", memo="b"))
    response = client.post(url(episode), post_data(version="1", memo="c"), HTTP_HX_REQUEST="true")
    assert response.status_code == 409 and 'id="conflict"' in response.content.decode()


def test_bad_input_gets_400_with_field_errors_and_writes_nothing(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(failure_type="NOPE-99", source="", confidence="sure"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "is not a failure type" in html and 'id="source-error"' in html
    assert not Coding.objects.exists()
    response = client.post(url(episode), post_data(source="setup"))  # a stage code given as a source
    assert response.status_code == 400 and "is not a responsibility source" in response.content.decode()


def test_not_a_failure_needs_a_reason_and_clears_the_codes(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(not_a_failure="on"))
    assert response.status_code == 400 and "Say why" in response.content.decode()
    client.post(url(episode), post_data(not_a_failure="on", not_a_failure_reason="their own config"))
    coding = Coding.objects.get()
    assert coding.not_a_failure and coding.failure_type is None and coding.source is None


def test_needs_a_new_type_is_saved_without_a_type(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(failure_type="", needs_new_type="on"))
    assert response.status_code == 302
    coding = Coding.objects.get()
    assert coding.needs_new_type and coding.failure_type is None and coding.stage.code == "iterative_execution"


def test_evidence_is_stored_as_a_verbatim_quote_with_offsets(client, bob, episode):
    client.force_login(bob)
    # The coder selected rendered text: no ** or backticks.
    client.post(url(episode), post_data(evidence="looped forever calling search"))
    coding = Coding.objects.get()
    assert BODY[coding.evidence_start : coding.evidence_end] == coding.evidence
    assert coding.evidence.startswith("looped") and "calling `search" in coding.evidence


def test_evidence_not_in_the_text_is_rejected(client, bob, episode):
    client.force_login(bob)
    response = client.post(url(episode), post_data(evidence="something the episode never says"))
    assert response.status_code == 400 and "must be a passage of the episode text" in response.content.decode()
    assert not Coding.objects.exists()


def _suggestion(episode, codes, **kw):
    return Suggestion.objects.create(
        episode=episode,
        backend="local",
        model="tfidf",
        prompt_version="v1",
        failure_type=codes.type("TUS-03"),
        source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
        cache_key=kw.pop("cache_key", "k1"),
        **kw,
    )


def test_a_coding_from_a_suggestion_points_back_to_it(client, bob, episode, codes):
    suggestion = _suggestion(episode, codes)
    client.force_login(bob)
    response = client.post(url(episode), post_data(from_suggestion=str(suggestion.pk)))
    assert response.status_code == 302
    assert Coding.objects.get().from_suggestion == suggestion
    suggestion.refresh_from_db()
    assert suggestion.status == SuggestionStatus.ACCEPTED


def test_a_suggestion_of_another_episode_is_refused(client, bob, episode, study, make_episode, codes):
    other = _suggestion(make_episode(study), codes)
    client.force_login(bob)
    response = client.post(url(episode), post_data(from_suggestion=str(other.pk)))
    assert response.status_code == 400 and not Coding.objects.exists()


def test_a_full_episode_takes_no_third_coder(client, alice, bob, django_user_model, study, episode, values_for):
    from annotate.studies.services import membership_set

    carol = django_user_model.objects.create_user(username="carol")
    membership_set(study=study, user=carol, role="coder")
    coding_save(episode=episode, coder=alice, values=values_for("TUS-03"), version=None)
    coding_save(episode=episode, coder=bob, values=values_for("TUS-03"), version=None)
    client.force_login(carol)
    html = client.get(url(episode)).content.decode()
    assert "already has its 2 coders" in html and 'id="coding-form"' not in html
    response = client.post(url(episode), post_data())
    assert response.status_code == 409 and Coding.objects.count() == 2


@pytest.fixture
def values_for(codes):
    def make(type_code, source="agent_design", memo=""):
        return CodingValues(
            failure_type=codes.type(type_code),
            source=codes.source(source),
            stage=codes.stage("iterative_execution"),
            capability=codes.capability("actuation"),
            memo=memo,
        )

    return make


def test_blind_a_coder_sees_no_other_coding_until_they_saved_their_own(client, alice, bob, episode, values_for):
    coding_save(episode=episode, coder=alice, values=values_for("EXT-04", memo="alice-secret-memo"), version=None)
    client.force_login(bob)
    for page in (url(episode), url(episode, "")):
        html = client.get(page).content.decode()
        assert "EXT-04</code>" not in html and "alice-secret-memo" not in html and "alice" not in html.lower()
        assert "Blind coding" in html
    response = client.post(url(episode), post_data(), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert "alice-secret-memo" in html and "EXT-04</code>" in html  # revealed once Bob has saved
    assert "alice-secret-memo" in client.get(url(episode, "")).content.decode()


def test_without_blinding_codings_are_visible_before_saving(client, alice, bob, study, episode, values_for):
    study.blind = False
    study.save()
    coding_save(episode=episode, coder=alice, values=values_for("EXT-04", memo="open-memo"), version=None)
    client.force_login(bob)
    assert "open-memo" in client.get(url(episode)).content.decode()


def test_an_owner_codes_blind_too_but_sees_everything_on_the_episode_page(client, alice, bob, episode, values_for):
    coding_save(episode=episode, coder=bob, values=values_for("EXT-04", memo="bob-memo"), version=None)
    client.force_login(alice)
    assert "bob-memo" not in client.get(url(episode)).content.decode()
    assert "bob-memo" in client.get(url(episode, "")).content.decode()


@pytest.mark.parametrize("n", [4, 40])
def test_next_and_the_coding_page_cost_a_fixed_number_of_queries(
    client, bob, alice, study, make_episode, values_for, django_assert_num_queries, n
):
    from annotate.models import Document, Episode

    docs = Document.objects.bulk_create(
        Document(study=study, kind="github_issue", external_id=f"x#{i}", cluster="x", title=f"t{i}", body=BODY)
        for i in range(n)
    )
    Episode.objects.bulk_create(Episode(document=d, study=study, queue_key=(i * 7919) % n) for i, d in enumerate(docs))
    for ep in Episode.objects.order_by("queue_key")[: n // 2]:
        coding_save(episode=ep, coder=alice, values=values_for("TUS-03", memo="m"), version=None)
    from annotate.coding.selectors import codebook_picker

    codebook_picker(study.codebook)  # a published codebook is cached per process after its first use
    client.force_login(bob)
    # session, user, membership + the queue's (see test_queue)
    heads = 1 if connection.features.supports_slicing_ordering_in_compound else study.coders_per_episode
    with django_assert_num_queries(11 + heads):
        response = client.post("/studies/alpha/next/")
    ep = Episode.objects.get(pk=int(response.url.split("/")[-3]))
    # session, user, membership, and the episode with whether bob coded it (no) and holds a live lease
    # on it (the one "next" gave); a GET claims nothing, and alice's coding stays hidden, so no query for it
    with django_assert_num_queries(4):
        assert client.get(url(ep)).status_code == 200
    # session, user, membership, the episode (no coding of bob's); savepoint, lock the episode, end the
    # coder's lease, the coding (for its version; on PostgreSQL both in one statement), insert coding +
    # history, count and update the episode (one compiled UPDATE), bump the study's data version, release;
    # then the claim of the next episode in the same request: the queue's queries less session, user,
    # membership and the resume check (the save ended bob's lease)
    save = 12 if connection.vendor == "postgresql" else 13
    with django_assert_num_queries(save + 7 + heads):
        assert client.post(url(ep), post_data(action="next")).status_code == 302
    # session, user, membership, the episode (with the id of bob's coding), his coding, all codings
    # (visible now; no lease needed to edit)
    with django_assert_num_queries(6):
        assert "alice" in client.get(url(ep)).content.decode()


def test_the_codebook_data_is_a_script_cached_per_codebook_version(client, bob, episode, charlie):
    from annotate.coding.selectors import codebook_picker

    picker = codebook_picker(episode.study.codebook)
    client.force_login(bob)
    html = client.get(url(episode)).content.decode()
    src = f"/codebooks/{picker.codebook_id}/coding-{picker.stamp}.js"
    assert f'<script src="{src}" defer></script>' in html
    assert len(html) < 40_000  # the 50 KB of definitions are no longer in every page
    response = client.get(src)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/javascript")
    assert "immutable" in response["Cache-Control"] and "private" in response["Cache-Control"]
    body = response.content.decode()
    assert body.startswith("window.FaultlineCodebook = {") and '"code":"TUS-03"' in body
    assert client.get(f"/codebooks/{picker.codebook_id}/coding-20000101000000000000.js").status_code == 404
    client.logout()
    assert client.get(src).status_code == 302  # a login is needed, as for every page
