import pytest
from django.core.exceptions import ValidationError

from annotate.coding.services import CodingConflict, CodingValues, coding_delete, coding_save
from annotate.models import Coding, EpisodeStatus


@pytest.fixture
def values(codes):
    return CodingValues(
        failure_type=codes.type("TUS-03"),
        source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
        confidence="high",
    )


def test_it_creates_then_updates_with_a_version(study, bob, make_episode, values, codes):
    ep = make_episode(study)
    coding = coding_save(episode=ep, coder=bob, values=values, version=None)
    assert coding.version == 1
    ep.refresh_from_db()
    assert ep.n_codings == 1 and ep.status == EpisodeStatus.OPEN
    updated = coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": "why"}), version=1)
    assert updated.version == 2
    assert Coding.objects.get().memo == "why"


def test_a_stale_version_conflicts_and_overwrites_nothing(study, bob, make_episode, values):
    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=values, version=None)
    coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": "first"}), version=1)
    with pytest.raises(CodingConflict) as err:
        coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": "stale"}), version=1)
    assert err.value.current.memo == "first"
    assert Coding.objects.get().memo == "first"


def test_a_second_create_conflicts(study, bob, make_episode, values):
    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=values, version=None)
    with pytest.raises(CodingConflict):
        coding_save(episode=ep, coder=bob, values=values, version=None)
    assert Coding.objects.count() == 1


def test_it_rejects_codes_from_another_axis_or_codebook(study, bob, make_episode, values, codes):
    ep = make_episode(study)
    with pytest.raises(ValidationError) as err:
        coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "source": codes.stage("setup")}),
                    version=None)  # fmt: skip
    assert "source" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        coding_save(episode=ep, coder=bob, values=CodingValues(), version=None)
    assert set(err.value.message_dict) >= {"failure_type", "source", "stage", "capability"}
    assert not Coding.objects.exists()


def test_not_a_failure_needs_a_reason_and_clears_codes(study, bob, make_episode, values):
    ep = make_episode(study)
    with pytest.raises(ValidationError):
        coding_save(episode=ep, coder=bob, values=CodingValues(not_a_failure=True), version=None)
    coding = coding_save(
        episode=ep, coder=bob,
        values=CodingValues(**{**values.__dict__, "not_a_failure": True, "not_a_failure_reason": "user config"}),
        version=None,
    )  # fmt: skip
    assert coding.failure_type is None and coding.source is None


def test_every_change_is_kept_in_history(study, bob, alice, make_episode, values, codes):
    ep = make_episode(study)
    coding = coding_save(episode=ep, coder=bob, values=values, version=None)
    coding = coding_save(episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": "a"}), version=1)
    coding = coding_save(
        episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "memo": "a", "source": codes.source("llm")}),
        version=2,
    )  # fmt: skip
    coding_id = coding.id
    coding_delete(coding=coding, user=alice)
    history = list(Coding.history.filter(id=coding_id).order_by("history_date"))
    assert [h.history_type for h in history] == ["+", "~", "~", "-"]
    assert [h.history_user for h in history] == [bob, bob, bob, alice]
    assert history[1].memo == "a" and history[0].memo == ""
    assert history[2].source.code == "llm" and history[1].source.code == "agent_design"
    ep.refresh_from_db()
    assert ep.n_codings == 0


def test_k_codings_complete_an_episode(study, alice, bob, make_episode, values):
    ep = make_episode(study)
    coding_save(episode=ep, coder=alice, values=values, version=None)
    coding_save(episode=ep, coder=bob, values=values, version=None)
    ep.refresh_from_db()
    assert ep.n_codings == 2 and ep.status == EpisodeStatus.CODED


def _suggestion(ep, values, **kw):
    from annotate.models import Suggestion

    return Suggestion.objects.create(
        episode=ep, backend="local", model="tfidf", prompt_version="p1", cache_key=f"k{ep.pk}",
        failure_type=values.failure_type, source=values.source, stage=values.stage, capability=values.capability,
        confidence=0.8, **kw,
    )  # fmt: skip


def test_saving_a_suggestion_as_is_accepts_it(study, bob, make_episode, values):
    ep = make_episode(study)
    s = _suggestion(ep, values)
    coding = coding_save(episode=ep, coder=bob, values=values, version=None, from_suggestion=s)
    s.refresh_from_db()
    assert (s.status, s.reviewed_by, coding.from_suggestion) == ("accepted", bob, s)


def test_changing_a_suggestion_before_saving_marks_it_edited(study, bob, make_episode, values, codes):
    ep = make_episode(study)
    s = _suggestion(ep, values)
    coding_save(
        episode=ep, coder=bob, values=CodingValues(**{**values.__dict__, "stage": codes.stage("planning")}),
        version=None, from_suggestion=s,
    )  # fmt: skip
    s.refresh_from_db()
    assert s.status == "edited"


def test_a_suggestion_for_another_episode_is_refused(study, bob, make_episode, values):
    s = _suggestion(make_episode(study), values)
    with pytest.raises(ValidationError):
        coding_save(episode=make_episode(study), coder=bob, values=values, version=None, from_suggestion=s)
    assert not Coding.objects.exists()
