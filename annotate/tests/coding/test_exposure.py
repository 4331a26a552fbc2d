"""The exposure experiment: seeded arms in blocks per coder, the open time carried signed, a report by hand."""

from __future__ import annotations

import hashlib
import re
import time

import pytest
from django.core import signing
from django.urls import reverse

from annotate.coding.experiment import SALT, study_exposure_report
from annotate.coding.exposure import ExposureRow, exposure_arm, exposure_report
from annotate.models import Adjudication, Coding, CodingExposure, Suggestion, SuggestionStatus
from annotate.studies.services import membership_set
from annotate.suggestions.services import suggestions_make
from conftest import PASSWORD

pytestmark = pytest.mark.django_db

SEED = 424242


def _by_hand(seed: int, coder: int, n: int) -> str:
    coin = hashlib.blake2b(f"{seed}:exposure:{coder}:{n // 2}".encode(), digest_size=8).digest()[0] & 1
    return ("before", "after")[(n % 2) ^ coin]


def test_arms_come_in_seeded_blocks_of_two_per_coder():
    for coder in (7, 8):
        arms = [exposure_arm(SEED, coder, n) for n in range(40)]
        assert arms == [_by_hand(SEED, coder, n) for n in range(40)]
        assert all(arms[2 * b] != arms[2 * b + 1] for b in range(20))  # every block has one of each
        assert arms.count("before") == arms.count("after") == 20
    # Different coders and seeds get different sequences (the coin is per coder and block).
    assert [exposure_arm(SEED, 7, n) for n in range(40)] != [exposure_arm(SEED, 8, n) for n in range(40)]
    assert [exposure_arm(SEED, 7, n) for n in range(40)] != [exposure_arm(SEED + 1, 7, n) for n in range(40)]


def test_the_report_equals_a_hand_computation():
    rows = [
        # before: 4 codings by 2 coders on 2 episodes; 3 of 4 right; 1 of 2 pairs agree; 2 accepted, 1 overturned.
        ExposureRow(1, 10, "before", "EXT-02", "EXT-02", 30.0, "EXT-02"),
        ExposureRow(1, 11, "before", "EXT-02", "EXT-02", 50.0, None),
        ExposureRow(2, 10, "before", "CTL-01", "CTL-02", 40.0, "CTL-01"),
        ExposureRow(2, 11, "before", "CTL-02", "CTL-02", 70.0, None),
        # after: 2 codings; 1 of 2 right; no pair (different episodes); nothing accepted; one time unknown.
        ExposureRow(3, 10, "after", "OUT-02", "OUT-02", 90.0, None),
        ExposureRow(4, 11, "after", "OUT-01", None, None, None),
        ExposureRow(5, 11, "after", "OUT-01", "OUT-02", 120.0, None),
    ]
    before, after = exposure_report(rows, seed=1).arms
    assert (before.arm, before.codings, before.coders) == ("before", 4, 2)
    assert (before.accuracy.k, before.accuracy.n, before.accuracy.value) == (3, 4, 0.75)
    assert (before.agreement.k, before.agreement.n, before.agreement.value) == (1, 2, 0.5)
    assert (before.automation_bias.k, before.automation_bias.n, before.automation_bias.value) == (1, 2, 0.5)
    assert before.time_to_save.n == 4 and before.time_to_save.median_s == 45.0
    assert before.time_to_save.low_s <= 45.0 <= before.time_to_save.high_s
    # Wilson 95% for 3/4, by hand: centre (0.75 + 1.96²/8) / (1 + 1.96²/4), half-width as in lib.stats.
    z = 1.959963984540054
    centre = (0.75 + z * z / 8) / (1 + z * z / 4)
    half = z * (0.75 * 0.25 / 4 + z * z / 64) ** 0.5 / (1 + z * z / 4)
    assert before.accuracy.low == round(centre - half, 4) and before.accuracy.high == round(centre + half, 4)
    assert (after.codings, after.coders, after.accuracy.k, after.accuracy.n) == (3, 2, 1, 2)
    assert after.agreement.n == 0 and after.agreement.value is None and after.automation_bias.n == 0
    assert after.time_to_save.n == 2 and after.time_to_save.median_s == 105.0


def _token(client, study, ep) -> str:
    page = client.get(reverse("coding_page", args=[study.slug, ep.pk]))
    assert page.status_code == 200
    return re.search(r'name="exposure" value="([^"]+)"', page.content.decode()).group(1)


def _save(client, study, ep, token, code="EXT-02", **extra):
    data = {
        "failure_type": code, "source": "tool_service", "stage": "iterative_execution", "capability": "actuation",
        "confidence": "medium", "version": "", "exposure": token, **extra,
    }  # fmt: skip
    response = client.post(reverse("coding_page", args=[study.slug, ep.pk]), data)
    assert response.status_code == 302, response.content.decode()[:500]


def test_two_coders_with_a_fixed_seed_get_the_seeded_arms_and_the_report_adds_up(
    study, make_episode, alice, bob, vera, client, codes
):
    study.queue_seed = SEED
    study.exposure_experiment = True
    study.save(update_fields=["queue_seed", "exposure_experiment"])
    membership_set(study=study, user=vera, role="coder")
    body = "The search tool answered HTTP 429 Too Many Requests and the agent gave up without retrying."
    episodes = [make_episode(study, title=f"Throttled {i}", body=body) for i in range(4)]
    suggestions_make(study=study, backend="local")
    for coder in (bob, vera):
        client.login(username=coder.username, password=PASSWORD)
        for n, ep in enumerate(episodes):
            page = client.get(reverse("coding_page", args=[study.slug, ep.pk])).content.decode()
            expected = exposure_arm(SEED, coder.pk, n)
            # The `after` arm's panel waits for a first choice; `before` loads at once.
            assert ('data-guard="1"' in page) == (expected == "after")
            token = re.search(r'name="exposure" value="([^"]+)"', page).group(1)
            suggestion = Suggestion.objects.get(episode=ep)
            accept = coder == bob and n == 0
            code = "EXT-02" if coder == bob or n < 2 else "TUS-01"
            # Accepting keeps the suggestion's own axis codes (whatever the local model suggests for them).
            taken = {a: getattr(suggestion, a).code for a in ("source", "stage", "capability")} if accept else {}
            _save(client, study, ep, token, code, from_suggestion=suggestion.pk if accept else "", **taken)
            assert CodingExposure.objects.get(episode=ep, coder=coder).arm == expected
        client.logout()
    # A later edit keeps the first record.
    client.login(username=bob.username, password=PASSWORD)
    first = CodingExposure.objects.get(episode=episodes[0], coder=bob)
    assert first.opened_at is not None and first.saved_at >= first.opened_at
    version = Coding.objects.get(episode=episodes[0], coder=bob).version
    _save(client, study, episodes[0], _token(client, study, episodes[0]), version=version, memo="edited")
    assert CodingExposure.objects.get(episode=episodes[0], coder=bob) == first
    assert CodingExposure.objects.get(episode=episodes[0], coder=bob).saved_at == first.saved_at
    # Final labels: adjudicated EXT-02 everywhere except episode 3, adjudicated TUS-01 (overturning nobody's accept).
    for i, ep in enumerate(episodes):
        code = "TUS-01" if i == 3 else "EXT-02"
        Adjudication.objects.update_or_create(
            episode=ep,
            defaults={
                "adjudicator": alice, "failure_type": codes.type(code), "source": codes.source("tool_service"),
                "stage": codes.stage("iterative_execution"), "capability": codes.capability("actuation"),
                "rationale": "final",
            },
        )  # fmt: skip
    client.force_login(alice)  # a report of everyone's codings: the owner's, in a blind study
    response = client.get("/api/v1/studies/alpha/suggestions/exposure/")
    assert response.status_code == 200
    report = {a["arm"]: a for a in response.json()["arms"]}
    # By hand from the rows: coder, episode index, arm, chosen type, final type.
    rows = [
        (
            c,
            i,
            exposure_arm(SEED, c.pk, i),
            "EXT-02" if c == bob or i < 2 else "TUS-01",
            "TUS-01" if i == 3 else "EXT-02",
        )
        for c in (bob, vera)
        for i in range(4)
    ]
    for arm in ("before", "after"):
        mine = [r for r in rows if r[2] == arm]
        assert report[arm]["codings"] == len(mine) == 4  # blocks of two: two per coder in each arm
        assert report[arm]["accuracy"]["k"] == sum(r[3] == r[4] for r in mine)
        pairs = [(a, b) for a in mine for b in mine if a[0] == bob and b[0] == vera and a[1] == b[1]]
        assert report[arm]["agreement"]["n"] == len(pairs)
        assert report[arm]["agreement"]["k"] == sum(a[3] == b[3] for a, b in pairs)
        accepted = [r for r in mine if r[0] == bob and r[1] == 0]
        assert report[arm]["automation_bias"]["n"] == len(accepted)
        assert report[arm]["automation_bias"]["k"] == 0
        assert report[arm]["time_to_save"]["n"] == 4
    assert Suggestion.objects.get(episode=episodes[0]).status == SuggestionStatus.ACCEPTED
    page = client.get(reverse("suggestion_quality_page", args=[study.slug])).content.decode()
    assert "How much do suggestions sway coders?" in page and "Suggestions only after it" in page


def test_a_forged_or_foreign_token_records_nothing_and_an_old_one_keeps_no_time(study, make_episode, bob, client):
    study.exposure_experiment = True
    study.save(update_fields=["exposure_experiment"])
    a, b, c = (make_episode(study, body="The tool timed out.") for _ in range(3))
    client.login(username=bob.username, password=PASSWORD)
    token_for_a = _token(client, study, a)
    _save(client, study, b, token_for_a)  # the token of another episode
    _save(client, study, c, token_for_a[:-2] + "xx")  # a forged signature
    assert not CodingExposure.objects.filter(episode__in=[b, c]).exists()
    stale = signing.dumps({"e": a.pk, "u": bob.pk, "a": "after", "t": time.time() - 6 * 3600}, salt=SALT)
    _save(client, study, a, stale)
    record = CodingExposure.objects.get(episode=a)
    assert record.arm == "after" and record.opened_at is None and record.seconds_to_save is None


def test_opening_the_coding_page_records_nothing(study, make_episode, bob, client):
    study.exposure_experiment = True
    study.save(update_fields=["exposure_experiment"])
    ep = make_episode(study, body="The tool timed out.")
    client.login(username=bob.username, password=PASSWORD)
    _token(client, study, ep)
    _token(client, study, ep)
    assert not CodingExposure.objects.exists()


def test_changes_after_seeing_suggestions_are_counted_from_the_stored_first_choice():
    rows = [
        # after arm: first choice EXT-02, saw TUS-01, saved TUS-01 (changed, to the suggestion);
        ExposureRow(1, 10, "after", "TUS-01", None, None, None, first_choice_type="EXT-02", suggested_type="TUS-01"),
        # first choice kept;
        ExposureRow(2, 10, "after", "EXT-02", None, None, None, first_choice_type="EXT-02", suggested_type="TUS-01"),
        # changed, but not to the suggestion;
        ExposureRow(3, 11, "after", "CTL-01", None, None, None, first_choice_type="EXT-02", suggested_type="TUS-01"),
        # no stored first choice (an older coding): not counted.
        ExposureRow(4, 11, "after", "CTL-01", None, None, None),
        ExposureRow(5, 11, "before", "CTL-01", None, None, None),
    ]
    before, after = exposure_report(rows, seed=1).arms
    assert (after.changed_after_seeing.k, after.changed_after_seeing.n) == (2, 3)
    assert (after.changed_to_suggestion.k, after.changed_to_suggestion.n) == (1, 2)
    assert before.changed_after_seeing.n == 0 and before.changed_after_seeing.value is None


def test_the_after_arm_reports_a_coder_who_switched_to_the_suggestion(study, make_episode, bob, client):
    from annotate.coding.exposure import exposure_arm as arm_of

    study.queue_seed = next(seed for seed in range(100) if arm_of(seed, bob.pk, 0) == "after")
    study.exposure_experiment = True
    study.save(update_fields=["queue_seed", "exposure_experiment"])
    ep = make_episode(study, title="Throttled", body="The search tool answered HTTP 429 and the agent gave up.")
    suggestions_make(study=study, backend="local")
    suggested = Suggestion.objects.get(episode=ep).failure_type.code
    first = "CTL-01" if suggested != "CTL-01" else "EXT-02"
    client.login(username=bob.username, password=PASSWORD)
    token = _token(client, study, ep)
    url = reverse("suggestion_first_choice", args=[study.slug, ep.pk])
    assert client.post(url, {"failure_type": first}, HTTP_HX_REQUEST="true").status_code == 200
    _save(client, study, ep, token, suggested)
    after = next(a for a in study_exposure_report(study).arms if a.arm == "after")
    assert (after.changed_after_seeing.k, after.changed_after_seeing.n) == (1, 1)
    assert (after.changed_to_suggestion.k, after.changed_to_suggestion.n) == (1, 1)
