"""Reports in Spanish, German, Portuguese, Chinese and Japanese: the English top type, never confidently wrong.

fixtures/multilingual/five.json: five reports written for these tests, each in English and in the five
languages (the Chinese and Japanese lexicon of annotate.suggestions._lang was written beside them, so this
file checks the mechanism; bench/suggest_multilingual_bench.py measures on dev.json and holdout.json).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotate.models import Suggestion
from annotate.suggestions import _text
from annotate.suggestions._lang import LANGUAGE_CAP, detect_language
from annotate.suggestions._text import language_cap, language_covered, reads_as_english, template_wrap
from annotate.suggestions.audit import foreign_script
from annotate.suggestions.base import codebook_spec_from_data
from annotate.suggestions.local import READ_THROUGH_LEXICON, LocalSuggester
from annotate.suggestions.services import suggestions_make
from conftest import PASSWORD

LANGUAGES = ("es", "de", "pt", "zh", "ja")
FLOOR = 0.3  # a study's default suggestion_min_confidence


def _fixture(name: str) -> list[dict]:
    path = Path(settings.BASE_DIR) / "fixtures" / "multilingual" / name
    return json.loads(path.read_text(encoding="utf-8"))["pairs"]


@cache
def _suggester() -> LocalSuggester:
    path = Path(settings.BASE_DIR) / "fixtures" / "codebook-v1.json"
    return LocalSuggester(codebook_spec_from_data(json.loads(path.read_text(encoding="utf-8"))))


@cache
def _answers() -> dict[tuple[str, str], object]:
    groups = _fixture("five.json")
    keys = [(g["id"], lang) for g in groups for lang in ("en", *LANGUAGES)]
    reports = {(g["id"], lang): r for g in groups for lang, r in g["reports"].items()}
    answers = _suggester().suggest_texts([reports[k]["body"] for k in keys], None, [reports[k]["title"] for k in keys])
    return dict(zip(keys, answers, strict=True))


def test_the_fixture_has_every_report_in_all_five_languages_and_english_gets_the_intended_type():
    groups = _fixture("five.json")
    assert len(groups) == 5 and all(set(g["reports"]) == {"en", *LANGUAGES} for g in groups)
    for g in groups:
        top = _answers()[(g["id"], "en")].candidates[0]
        assert top.failure_type == g["type"], g["id"]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_translated_report_gets_the_english_top_type_or_is_declined(lang):
    """Per language at least 4 of the 5 reports get the English top type; every one has it in its top 3."""
    answers = _answers()
    same = 0
    for g in _fixture("five.json"):
        english = answers[(g["id"], "en")].candidates[0].failure_type
        other = answers[(g["id"], lang)]
        assert not other.abstain_reason, (g["id"], lang)  # the five languages are read, not declined
        same += other.candidates[0].failure_type == english
        assert english in [c.failure_type for c in other.candidates], (g["id"], lang)
        assert all(c.evidence in g["reports"][lang]["body"] for c in other.candidates)  # quotes in the language read
    assert same >= 4, lang


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_translated_report_is_confident_it_is_shown_below_the_floor_with_a_note(lang):
    for g in _fixture("five.json"):
        answer = _answers()[(g["id"], lang)]
        assert answer.candidates[0].confidence <= LANGUAGE_CAP < FLOOR, (g["id"], lang)
        assert READ_THROUGH_LEXICON in answer.notes
        assert _answers()[(g["id"], "en")].notes == ()


def test_a_confident_wrong_type_in_another_language_is_refused(monkeypatch):
    """Every translated report of dev.json and five.json that the model, read uncapped, would offer above the floor
    is capped below it, its ranking kept. (At local-5, two Spanish dev reports got a wrong type at 0.56 and 0.53 this
    way; since the prior fitted on real issues, uncapped translations agree with their English, but the cap stays:
    a lexicon reading is never offered as a default.)"""
    groups = [g for name in ("dev.json", "five.json") for g in _fixture(name)]
    pairs = [(g, lang) for g in groups for lang in g["reports"] if lang != "en"]
    texts = [g["reports"][lang]["body"] for g, lang in pairs] + [g["reports"]["en"]["body"] for g in groups]
    titles = [g["reports"][lang]["title"] for g, lang in pairs] + [g["reports"]["en"]["title"] for g in groups]
    capped = _suggester().suggest_texts(texts, None, titles)
    monkeypatch.setattr(_text, "LANGUAGE_CAP", 1.0)  # what the model would say without the cap
    raw = _suggester().suggest_texts(texts, None, titles)
    confident = 0
    for i, (g, lang) in enumerate(pairs):
        if raw[i].abstain_reason:
            continue
        assert capped[i].candidates[0].confidence < FLOOR, (g["id"], lang)
        assert capped[i].candidates[0].failure_type == raw[i].candidates[0].failure_type  # only confidence cut
        if raw[i].candidates[0].confidence >= FLOOR:
            confident += 1
    assert confident >= 5, confident  # the cap has something to do
    for i in range(len(pairs), len(texts)):
        assert capped[i].candidates[0].confidence == raw[i].candidates[0].confidence  # English untouched


@pytest.mark.django_db
def test_on_the_coding_page_a_translated_report_has_no_default_accept(study, make_episode, bob, client):
    g = _fixture("five.json")[1]
    ep = make_episode(study, title=g["reports"]["de"]["title"], body=g["reports"]["de"]["body"])
    suggestions_make(study=study, backend="local")
    s = Suggestion.objects.get(episode=ep)
    assert s.failure_type.code == g["type"] and s.confidence < study.suggestion_min_confidence
    client.login(username=bob.username, password=PASSWORD)
    page = client.get(reverse("suggestion_panel", args=[study.slug, ep.pk])).content.decode()
    assert "No confident suggestion." in page and "suggestion-accept primary" not in page


@pytest.mark.parametrize("lang", ("en", *LANGUAGES))
def test_the_language_is_told_from_the_report_not_from_the_template_around_it(lang):
    for g in _fixture("five.json"):
        report = g["reports"][lang]
        assert detect_language(report["body"]) == lang, (g["id"], lang)
        wrapped = template_wrap(report["title"], report["body"])  # English headings and checklist around it
        assert reads_as_english(wrapped) == (lang == "en")
        assert language_cap(wrapped) == (1.0 if lang == "en" else LANGUAGE_CAP)


def test_a_script_with_no_lexicon_is_still_declined():
    """The audit's check 4 maps letters onto common Chinese characters: no failure vocabulary, declined."""
    for g in _fixture("five.json"):
        assert language_covered(g["reports"]["zh"]["body"]) and language_covered(g["reports"]["ja"]["body"])
        assert not language_covered(foreign_script(g["reports"]["en"]["body"])), g["id"]


@pytest.mark.django_db
def test_a_translated_report_is_never_the_default_even_where_a_study_lowers_its_threshold(
    study, make_episode, bob, client
):
    """The cap keeps a translation under the default floor; a study may set its floor lower, and then the stored
    flag (Suggestion.language_capped, asked by suggestion_confident) still refuses the default Accept."""
    from annotate.suggestions.selectors import suggestion_confident

    study.suggestion_min_confidence = 0.05
    study.save(update_fields=["suggestion_min_confidence"])
    g = _fixture("five.json")[1]
    de = make_episode(study, title=g["reports"]["de"]["title"], body=g["reports"]["de"]["body"])
    en = make_episode(study, title=g["reports"]["en"]["title"], body=g["reports"]["en"]["body"])
    suggestions_make(study=study, backend="local")
    s_de, s_en = Suggestion.objects.get(episode=de), Suggestion.objects.get(episode=en)
    assert s_de.language_capped and s_de.confidence >= study.suggestion_min_confidence
    assert not s_en.language_capped and suggestion_confident(s_en, study)
    assert not suggestion_confident(s_de, study)
    client.login(username=bob.username, password=PASSWORD)
    page = client.get(reverse("suggestion_panel", args=[study.slug, de.pk])).content.decode()
    assert "No confident suggestion." in page and "suggestion-accept primary" not in page
    assert "not in English" in page
