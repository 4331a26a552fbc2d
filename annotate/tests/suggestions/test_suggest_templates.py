# ruff: noqa: RUF001 (the Chinese issue form keeps its full-width punctuation)
"""Issue forms of six real projects: the scaffolding is read as nothing, and never quoted (issue 30, point 2)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest
from django.conf import settings

from annotate.suggestions._text import claim_spans, clean_report, is_claim, quote_flaw, strip_template
from annotate.suggestions.base import codebook_spec_from_data
from annotate.suggestions.local import LocalSuggester
from annotate.tests.factories.issue_templates import SCAFFOLDING, TEMPLATED_REPORTS

IDS = [project for project, *_ in TEMPLATED_REPORTS]


@cache
def _suggester() -> LocalSuggester:
    path = Path(settings.BASE_DIR) / "fixtures" / "codebook-v1.json"
    return LocalSuggester(codebook_spec_from_data(json.loads(path.read_text(encoding="utf-8"))))


@cache
def _answers():
    titles = [title for _, title, *_ in TEMPLATED_REPORTS]
    texts = [plain for *_, plain, _ in TEMPLATED_REPORTS] + [tpl for *_, tpl in TEMPLATED_REPORTS]
    answers = _suggester().suggest_texts(texts, None, titles + titles)
    n = len(TEMPLATED_REPORTS)
    return answers[:n], answers[n:]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize("case", TEMPLATED_REPORTS, ids=IDS)
def test_the_form_is_read_as_nothing_the_report_as_written(case):
    """What the model reads of the filled-in form is exactly what it reads of the report alone."""
    _, _, plain, templated = case
    assert _lines(clean_report(templated)) == _lines(clean_report(plain))
    cleaned = clean_report(templated)
    for piece in SCAFFOLDING:
        assert piece not in cleaned, piece


@pytest.mark.parametrize("case", TEMPLATED_REPORTS, ids=IDS)
def test_the_reporters_prose_is_kept_and_nothing_else(case):
    _, _, plain, templated = case
    prose = strip_template(templated)
    assert "```" not in prose and "Error:" not in prose and "Exception" not in prose  # logs are not prose
    for line in _lines(strip_template(plain)):
        assert line in prose


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_wrapping_a_report_in_its_projects_form_keeps_the_type_ranking(rank):
    plain, templated = _answers()
    for (project, *_), a, b in zip(TEMPLATED_REPORTS, plain, templated, strict=True):
        assert a.candidates[rank].failure_type == b.candidates[rank].failure_type, project
        assert a.candidates[rank].confidence == pytest.approx(b.candidates[rank].confidence, abs=1e-6), project


def _cut(text: str, quote: str) -> bool:
    at = text.index(quote)
    end = at + len(quote)
    return (at > 0 and text[at - 1].isalnum() and quote[0].isalnum()) or (
        end < len(text) and text[end].isalnum() and quote[-1].isalnum()
    )


def test_every_quote_is_the_reporters_own_words_whole_never_the_form():
    _, templated = _answers()
    quotes = 0
    for (project, _, plain, text), answer in zip(TEMPLATED_REPORTS, templated, strict=True):
        form_lines = set(_lines(text)) - set(_lines(plain))
        assert answer.candidates[0].evidence, project  # the top candidate is supported by a quote
        for c in answer.candidates:
            if not c.evidence:
                continue
            quotes += 1
            assert c.evidence in plain, (project, c.evidence)  # words of the report, not of the form
            assert is_claim(text, c.evidence) and not _cut(text, c.evidence), (project, c.evidence)
            assert not any(c.evidence in line or line in c.evidence for line in form_lines), (project, c.evidence)
            assert not re.match(r"\s*(#|[-*]\s*\[|\*\*|[\w ]{1,30}:\s*$)", c.evidence), (project, c.evidence)
    assert quotes >= 2 * len(TEMPLATED_REPORTS)


@pytest.mark.parametrize("case", TEMPLATED_REPORTS, ids=IDS)
def test_no_claim_of_a_form_is_a_form_line_or_a_piece_of_a_word(case):
    _, _, plain, templated = case
    form_lines = set(_lines(templated)) - set(_lines(plain))
    spans = claim_spans(templated)
    assert spans
    for s in spans:
        quote = templated[s.start : s.end]
        assert quote.strip() == quote and not _cut(templated, quote), quote
        assert not any(quote in line for line in form_lines), quote
        assert not any(piece in quote for piece in SCAFFOLDING), quote


def test_a_label_opening_a_line_is_left_out_of_the_quote_and_a_long_sentence_is_quoted_by_clauses():
    text = (
        "**Expected behavior:** the agent stops after the first failed tool call.\n\n"
        + "The planner keeps asking the search tool for the same page, "
        + ", ".join(f"then page {n} of the results" for n in range(2, 30))
        + ", and never answers the user.\n"
    )
    quotes = [text[s.start : s.end] for s in claim_spans(text)]
    assert "the agent stops after the first failed tool call." in quotes
    assert not any("Expected" in q for q in quotes)
    assert "The planner keeps asking the search tool for the same page" in quotes
    assert "and never answers the user." in quotes
    assert all(len(q) <= 300 and not _cut(text, q) for q in quotes)


def test_pasted_source_config_tables_and_pictures_are_never_quoted():
    text = (
        "The agent ignores the network setting below and every curl in the sandbox is blocked.\n"
        "[permissions.network]\n"
        "allow_local_binding = true\n"
        "agent = Agent(model=model, tools=[search])\n"
        "| tool | result | calls |\n"
        '![screenshot of the blocked call](https://example.com/a.png) <img width="400" src="x.png">\n'
        "```python\n"
        "def run(agent):\n"
        "    return agent.invoke({'input': 'fetch the page'})\n"
        "```\n"
        "```\n"
        "curl: (7) Failed to connect to example.com port 443: Connection refused\n"
        "```\n"
    )
    quotes = [text[s.start : s.end] for s in claim_spans(text)]
    assert quotes == [
        "The agent ignores the network setting below and every curl in the sandbox is blocked.",
        "curl: (7) Failed to connect to example.com port 443: Connection refused",
    ]


def test_logs_and_tracebacks_pasted_without_a_fence_are_read_as_logs_and_never_joined_to_a_sentence():
    text = (
        "The worker dies every time the planner hands over to the coder agent.\n"
        "There was no outage. Two asks:\n"
        "24.04.05 15:19:19: root: INFO : handoff planner -> coder\n"
        "2024-05-04 15:19:20,118 ERROR agent.loop: handoff failed\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app/agents/loop.py", line 88, in step\n'
        "    for msg in self._handoff(messages=history, **kwargs):\n"
        "KeyError: 'coder'\n"
        "{'error': {'code': 500, 'message': 'handoff target missing'}}\n"
        "<tool_call>\n"
        "<function=handoff>\n"
        "The coder agent is registered, so the handoff should find it.\n"
    )
    quotes = [text[s.start : s.end] for s in claim_spans(text)]
    prose = [text[s.start : s.end] for s in claim_spans(text) if not s.code]
    assert prose == [
        "The worker dies every time the planner hands over to the coder agent.",
        "There was no outage.",
        "The coder agent is registered, so the handoff should find it.",
    ]
    assert "KeyError: 'coder'" in quotes and not any("for msg in" in q or "<function" in q for q in quotes)
    assert all("\n" not in q for q in quotes)
    assert "for msg in self._handoff" in clean_report(text) and "There was no outage. Two asks:" in clean_report(text)


def test_quote_flaw_names_each_kind_of_bad_quote_and_passes_the_reporters_sentences():
    """The measure of `quotes_template_share` must catch what it claims to, by rules of its own."""
    *_, text = TEMPLATED_REPORTS[3]  # microsoft/autogen: bold labels and placeholder sentences
    assert quote_flaw(text, "Describe the bug**") == "label"
    assert quote_flaw(text, "What happened?") == "heading"
    assert quote_flaw(text, "If applicable, add screenshots to help explain your problem.") == "template sentence"
    assert quote_flaw(text, "ssistant agent ends the group chat") == "cut word"
    assert quote_flaw(text, "Describe the bug**\nThe assistant agent ends the group chat") == "label"
    assert quote_flaw(text, "the test was green") == "not in the text"
    _, _, _, openhands = TEMPLATED_REPORTS[1]
    assert quote_flaw(openhands, "I have checked the existing issues.") == "checkbox"
    env = "- OS: Ubuntu 22.04\n- Python version: 3.11.6\n\nThe agent loops."
    assert quote_flaw(env, "Python version: 3.11.6") == "environment line"
    assert quote_flaw(text, "Nobody checks the claim before the chat stops.") == ""
    for project, *_, templated in TEMPLATED_REPORTS:
        for s in claim_spans(templated):
            assert quote_flaw(templated, templated[s.start : s.end]) == "", project


def test_an_indented_code_block_is_code_not_prose():
    text = (
        "The agent never sees the tools loaded from the MCP server.\n\n"
        "        for tool in tools.tools:\n"
        "            agent_tools.append(Tool.from_mcp(session, tool))\n"
    )
    assert [text[s.start : s.end] for s in claim_spans(text)] == [
        "The agent never sees the tools loaded from the MCP server."
    ]
    assert "for tool in tools.tools:" in clean_report(text)


def test_a_pathological_line_is_read_in_linear_time():
    """A minified dump that starts like a statement once took 45 s for 140k characters (quadratic backtracking)."""
    import time

    text = "for " + "a.b(c) " * 9000 + "x\n" + "| " + "a | " * 9000 + "\n" + "**" + "a " * 20000
    start = time.perf_counter()
    clean_report(text), claim_spans(text), strip_template(text)
    assert time.perf_counter() - start < 3.0


CHINESE_REPORT = "代理一直用相同的参数调用同一个工具，重复了三十次，直到达到最大迭代次数才停止。"
CHINESE_FORM = f"""**问题描述 / Problem Description**
{CHINESE_REPORT}

1️⃣ 复现步骤
启动代理以后输入任意问题，观察工具调用日志。

## 运行环境
- 操作系统: Ubuntu 22.04
- Python 3.11.4

### 版本（必填）

0.3.1

## 自查清单
- [x] 我已经搜索过现有的问题
"""


def test_a_chinese_issue_form_is_stripped_like_an_english_one():
    cleaned = clean_report(CHINESE_FORM)
    assert _lines(cleaned) == [CHINESE_REPORT, "启动代理以后输入任意问题，观察工具调用日志。"]
    quotes = [CHINESE_FORM[s.start : s.end] for s in claim_spans(CHINESE_FORM)]
    assert CHINESE_REPORT in quotes and not any("Problem Description" in q or "0.3.1" in q for q in quotes)
    plain, form = _suggester().suggest_texts([CHINESE_REPORT, CHINESE_FORM], None, ["代理陷入循环"] * 2)
    assert plain.candidates[0].failure_type == form.candidates[0].failure_type == "CTL-01"


def test_a_section_named_after_the_model_keeps_its_content_when_it_is_the_models_output():
    text = (
        "### Model output\n\nSure, I deleted it.\n\n### System prompt\n\nNever delete files.\n\n"
        "### Model Name\n\ngpt-4o\n\n### Environment\n\nDocker on a laptop\n"
    )
    assert _lines(clean_report(text)) == ["Sure, I deleted it.", "Never delete files."]
