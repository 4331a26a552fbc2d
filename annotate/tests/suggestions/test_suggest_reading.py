"""The local model reads like a coder: templates stripped, claims as evidence, true rationales, other languages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings

from annotate.models import Suggestion
from annotate.suggestions._text import (
    claim_spans,
    clean_report,
    english_rendering,
    fold,
    gloss,
    is_claim,
    language_covered,
    reads_as_english,
    template_wrap,
)
from annotate.suggestions.base import codebook_spec
from annotate.suggestions.local import DECLINED_LANGUAGE, LocalSuggester
from annotate.suggestions.services import suggestions_make
from annotate.tests.factories.report_texts import (
    CHINESE,
    KOREAN,
    MAX_ITERATIONS,
    PAIRS,
    RATE_EN,
    SHORT_LOOP,
    TEMPLATED_SHORT_LOOP,
)

TRACEBACK_REPORT = """### Describe the bug

The agent crashes when the retriever returns no documents.

### Logs

```
Traceback (most recent call last):
  File "agent/run.py", line 88, in step
    best = docs[0]
IndexError: list index out of range
```

### Environment

- OS: Ubuntu 22.04
- Python version: 3.11.4
- retrievekit version: 2.3.1
"""


@pytest.fixture
def suggester(codebook):
    return LocalSuggester(codebook_spec(codebook))


def test_template_boilerplate_is_stripped_and_the_report_kept():
    clean = clean_report(TEMPLATED_SHORT_LOOP)
    assert SHORT_LOOP in clean
    for boilerplate in ("Feature Area", "Core / agent runtime", "searched the existing", "contributing guide",
                        "Python version", "VS Code", "No response", "Steps:", "<!--", "###"):  # fmt: skip
        assert boilerplate not in clean, boilerplate


def test_code_blocks_and_tracebacks_are_kept_and_environment_blocks_go():
    clean = clean_report(TRACEBACK_REPORT)
    assert "IndexError: list index out of range" in clean and 'File "agent/run.py", line 88, in step' in clean
    assert "The agent crashes when the retriever returns no documents." in clean
    assert "Ubuntu" not in clean and "2.3.1" not in clean and "Logs" not in clean


def test_a_short_report_in_a_template_gets_the_same_top_type_as_without_it(suggester):
    plain, templated = suggester.suggest_texts(
        [SHORT_LOOP, TEMPLATED_SHORT_LOOP], None, ["Agent got stuck in a loop"] * 2
    )
    assert plain.candidates[0].failure_type == templated.candidates[0].failure_type == "CTL-01"
    assert templated.candidates[0].evidence == SHORT_LOOP


def _samples() -> list[tuple[str, str]]:
    path = Path(settings.BASE_DIR) / "fixtures" / "samples" / "github_issues.json"
    return [(i["title"], i["body"]) for i in json.loads(path.read_text()) if "pull_request" not in i]


_HEADING_OR_LABEL = re.compile(r"^\s*(#{1,6}\s|[-*]\s*\[[ xX]\]|\*\*[^*]+\*\*:?\s*$|[\w ]{1,40}:\s*$)")
_ENV = re.compile(r"^\s*[-*]?\s*(OS|Python( version)?|[\w .-]*version)\s*:", re.I)


def test_no_evidence_quote_is_a_heading_a_template_label_a_version_line_or_a_word_fragment(suggester):
    """Every quote of every candidate, on every sample issue plain and inside a template, is a claim of the text."""
    samples = _samples()
    texts = [*(b for _, b in samples), *(template_wrap(t, b) for t, b in samples), TEMPLATED_SHORT_LOOP]
    titles = [t for t, _ in samples] * 2 + ["Agent got stuck in a loop"]
    answers = suggester.suggest_texts(texts, None, titles)
    quotes = 0
    for text, answer in zip(texts, answers, strict=True):
        for c in answer.candidates:
            if not c.evidence:
                continue
            quotes += 1
            assert is_claim(text, c.evidence), c.evidence
            assert not _HEADING_OR_LABEL.match(c.evidence) and not _ENV.match(c.evidence), c.evidence
            at = text.index(c.evidence)
            end = at + len(c.evidence)
            assert not (at and text[at - 1].isalnum() and c.evidence[0].isalnum()), c.evidence
            assert not (end < len(text) and text[end].isalnum() and c.evidence[-1].isalnum()), c.evidence
    assert quotes > 3 * len(samples)  # quotes were actually given, not avoided


def test_is_claim_refuses_template_pieces_and_fragments():
    wrapped = template_wrap("Loop", RATE_EN)
    assert not is_claim(wrapped, "### Feature Area") and not is_claim(wrapped, "VS Code version: Code - Insiders 1.")
    assert not is_claim(wrapped, "- [ ] I have searched existing issues") and not is_claim(
        wrapped, "esearch agent calls"
    )
    sentence = "Our research agent calls the web search API for every sub-question."
    assert is_claim(wrapped, sentence)
    assert any(wrapped[s.start : s.end] == sentence for s in claim_spans(wrapped))


_MATCHED = re.compile(r"“([^”]+)” \(([^)]+)\)")


def test_every_rationale_claim_is_true_of_the_text(suggester, codebook):
    """A matched indicator is one of the type's indicators, matched on 2+ words that the quoted sentence has."""
    spec = codebook_spec(codebook)
    samples = [*_samples()[:30], ("Loop", SHORT_LOOP), ("Iteration cap", MAX_ITERATIONS)]
    samples += [(p[0], p[1]) for p in PAIRS.values()] + [(p[2], p[3]) for p in PAIRS.values()]
    answers = suggester.suggest_texts([b for _, b in samples], None, [t for t, _ in samples])
    named = 0
    for (title, text), answer in zip(samples, answers, strict=True):
        words_in_text = set(re.findall(r"\w+", f"{title}\n{text}".lower()))
        for c in answer.candidates:
            indicators = spec.type_by_code(c.failure_type).indicators
            if c.rationale.startswith("Matched indicator"):
                assert f"of {c.failure_type}:" in c.rationale
                evidence_words = set(re.findall(r"\w+", c.evidence.lower()))
                for indicator, words in _MATCHED.findall(c.rationale):
                    named += 1
                    assert indicator in indicators, indicator
                    matched = [w.strip() for w in words.split(",")]
                    assert len(matched) >= 2 or len(re.findall(r"\w\w+", indicator)) == 1, (indicator, matched)
                    assert all(w in evidence_words for w in matched), (matched, c.evidence)
            terms = re.search(r"shared terms: ([^)]+)\)", c.rationale)
            for term in terms.group(1).split(", ") if terms else []:
                assert set(term.split()) <= words_in_text, term
                assert len(term) >= 5 and not any(ch.isdigit() for ch in term), term
    assert named > 20


def test_one_generic_word_names_no_indicator(suggester):
    """ "exceeded" is in the rate-limit indicators; alone it must not be reported as a rate-limit match."""
    answer = suggester.suggest_texts([MAX_ITERATIONS], None, ["Iteration cap on a refactor"])[0]
    for c in answer.candidates:
        if c.failure_type == "EXT-02":
            assert "Matched indicator" not in c.rationale
    assert answer.candidates[0].failure_type != "EXT-02"


@pytest.mark.parametrize("pair", ["loop", "rate limit", "malformed json"])
def test_the_same_report_in_english_and_spanish_gets_the_same_top_type(suggester, pair):
    en_title, en, es_title, es = PAIRS[pair]
    english, spanish = suggester.suggest_texts([en, es], None, [en_title, es_title])
    assert english.candidates[0].failure_type == spanish.candidates[0].failure_type
    assert (
        english.candidates[0].failure_type
        == {"loop": "CTL-01", "rate limit": "EXT-02", "malformed json": "OUT-02"}[pair]
    )
    assert all(c.evidence in es for c in spanish.candidates)  # quotes come from the Spanish text itself


def _multilingual(fold: str) -> list[dict]:
    path = Path(settings.BASE_DIR) / "fixtures" / "multilingual" / f"{fold}.json"
    return json.loads(path.read_text(encoding="utf-8"))["pairs"]


def test_translations_of_the_dev_reports_mostly_get_the_english_top_type(suggester):
    """fixtures/multilingual/dev.json: 13 reports, 18 translations (es, fr, de, pt); holdout.json is not read here."""
    groups = _multilingual("dev")
    reports = [(g["id"], lang, r) for g in groups for lang, r in g["reports"].items()]
    answers = suggester.suggest_texts([r["body"] for *_, r in reports], None, [r["title"] for *_, r in reports])
    top = {(gid, lang): a.candidates[0].failure_type for (gid, lang, _), a in zip(reports, answers, strict=True)}
    pairs = [(g["id"], lang) for g in groups for lang in g["reports"] if lang != "en"]
    agree = sum(top[p] == top[(p[0], "en")] for p in pairs)
    english_right = sum(top[(g["id"], "en")] == g["type"] for g in groups)
    # Measured at local-5: 16 of 18 agree (13 of 18 and the loop pair failing before), 11 of 13 English right.
    # At local-6 (the cold prior fitted on real issues): 15 of 18 agree, 12 of 13 English right; the pair lost is an
    # English report the prior now gets wrong (invented-order-id), its Spanish version right.
    assert len(pairs) == 18 and agree >= 15, [(p, top[p], top[(p[0], "en")]) for p in pairs]
    assert english_right >= 12
    for (gid, lang, report), answer in zip(reports, answers, strict=True):
        assert all(is_claim(report["body"], c.evidence) for c in answer.candidates if c.evidence), (gid, lang)


def test_other_languages_are_read_with_their_english_rendering_and_english_as_written():
    assert reads_as_english(PAIRS["loop"][1]) and not reads_as_english(PAIRS["loop"][3])
    assert fold("Límite ÉTAPE Übergabe") == "limite etape ubergabe"
    known = frozenset({"search_docs", "iteration"})
    rendering = english_rendering("Repite la misma llamada a search_docs; Werkzeug-Aufrufe, límites", known)
    assert rendering == "repeated identical call search_docs tool call limit"
    assert gloss("la herramienta repite") == "la herramienta tool repite repeated"


def test_a_language_the_model_does_not_read_is_declined_not_forced_into_the_first_types(suggester):
    assert not language_covered(KOREAN) and language_covered(PAIRS["loop"][3]) and language_covered(CHINESE)
    answer = suggester.suggest_texts([KOREAN], None, ["에이전트가 반복 호출에 갇힘"])[0]
    assert answer.abstain_reason == DECLINED_LANGUAGE and answer.candidates == () and not answer.error


def test_chinese_is_read_through_the_lexicon_and_kept_under_the_floor(suggester):
    answer = suggester.suggest_texts([CHINESE], None, ["代理陷入循环"])[0]
    assert answer.candidates[0].failure_type == "CTL-01" and answer.candidates[0].confidence < 0.3


def test_a_declined_suggestion_is_stored_without_codes_and_without_an_error(study, make_episode):
    ep = make_episode(study, title="에이전트가 반복 호출에 갇힘", body=KOREAN)
    result = suggestions_make(study=study, backend="local")
    s = Suggestion.objects.get(episode=ep)
    assert result["suggested"] == 1 and s.error == "" and s.abstain_reason == DECLINED_LANGUAGE
    assert s.failure_type is None and s.candidates == [] and s.confidence is None
