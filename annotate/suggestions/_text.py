"""Reading an issue like a coder does: template boilerplate out, the report and its logs in (pure).

GitHub issue templates wrap a short report in headings, checkboxes, "Environment"
blocks and version lines. Scored as text, that boilerplate outweighs a one-line
report ("Agent got stuck in a loop") and supplies quotes that are not claims
("### Feature Area"). `clean_report` keeps what carries the signal: the prose of
the report, and fenced code blocks and tracebacks verbatim.

`claim_spans` lists the sentences and log lines a quote may be taken from, as
spans of the original text (so quotes stay verbatim); `is_claim` is the same
rule for one quote, which tests and the audit use on any suggester's evidence.

`language_covered` tells whether a text is in a language the local model reads:
the codebook is English, and character n-grams carry over to other Latin-script
languages (Spanish, French, German...), not to Chinese, Japanese, Cyrillic...
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from annotate.suggestions._gloss import GLOSSARY, english_rendering, fold, gloss  # noqa: F401 (read from here)
from annotate.suggestions._lang import CJK_CHAR as _CJK_CHAR
from annotate.suggestions._lang import LANGUAGE_CAP, cjk_covered, detect_language, is_cjk

_FENCE = re.compile(r"^(```|~~~)")
# ATX headings, and the keycap-emoji headings of some Chinese forms ("1️⃣ 描述一下问题").
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s|^\s*[#*\d]\ufe0f?\u20e3")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_]\s*){3,}$")
_UNCHECKED = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s*\[\s\]\s")
_CHECKED = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s*\[[xX]\]\s*")
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
# Pictures and HTML carry no words of the report: blanked (same length, so offsets hold) before reading.
_MARKUP = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)|</?(?:img|details|summary|br|p|div|sub|sup|kbd|b|i|a)\b[^>\n]*>", re.I)
# "Key: value" lines of an environment block, and bare version lines.
_ENV_KEYS = (
    r"(?:os|operating system|platform|python(?: version)?|node(?:\.js)?(?: version)?|version|[\w .-]*version|"
    r"browser|environment|system|architecture|arch|package(?: version)?|sdk(?: version)?|library version|"
    r"model(?: version| name| used| provider)?|(?:llm |model )?provider|runtime|ide|vs ?code|commit|build|device|"
    r"kernel|docker|installed via|install method|installation|gpu|cuda|ram|memory size|cpu|machine|hardware|"
    r"executable|pip|conda|langchain[\w-]*|llama[\w-]*|openai|anthropic|pydantic|torch|transformers)"
)
_ENV_LINE = re.compile(rf"^\s*(?:[-*>]\s*)*(?:\*\*|__)?{_ENV_KEYS}(?:\*\*|__)?\s*[:=\uff1a]\s*(?:\*\*)?\s*\S.*$", re.I)
# A package list (pip freeze, `pip list`, a lock file): name and version and nothing else.
_PACKAGE_LINE = re.compile(r"^\s*(?:[-*>]\s*)*[\w.\-\[\]@/]+\s*(?:==|>=|<=|~=|\^|@|:|\s)\s*v?\d+(?:\.[\w+-]+)+\s*$")
_VERSIONISH = re.compile(r"\bv?\d+\.\d+(?:\.\d+)?(?:[-.\w]*)?\b")
# The section headings of issue forms whose content is metadata, not the report: versions, platforms,
# models, install methods, pre-flight checklists, "who can help", component pickers.
_META_HEADING = re.compile(
    r"\b(?:os|operating systems?|platforms?|versions?|model(?: name| used)?|(?:model |llm )?providers?|"
    r"installation|install method|how (?:are|do) you (?:run|install)\w*|(?:which )?areas?|components?|packages?|"
    r"environments?|system info(?:rmation)?|who can help|checklist|checked other resources|existing issues?|"
    r"search(?:ed)? (?:for )?existing|browsers?|devices?|commit|hardware|gpu|deployment|self[- ]host\w*|"
    r"willing to submit|code of conduct|information|feature area|priority|severity|runtime|installed|"
    r"virtual environment|dependencies|pip freeze|system (?:info\w*|details|specs?))\b|"
    # Chinese and Japanese forms: version, environment, OS, system info, checklist, deployment, client.
    r"版本|环境|環境|操作系统|系统信息|系統資訊|自查清单|检查清单|部署方式|安装方式|客户端|バージョン|動作環境",
    re.I,
)
# Headings that name the report's content even when they name a model or a system ("Model output",
# "System prompt", "Relevant log output"): never a metadata section.
_CONTENT_HEADING = re.compile(
    r"output|response|behaviou?r|logs?\b|errors?\b|trace|result|reproduc|expect|actual|describ|happen|steps|"
    r"code|example|context|prompt|problem|issue description|summary|输出|日志|错误|报错|问题|描述|复现",
    re.I,
)
# A template label: a short line that only names a section ("**Describe the bug**", "Steps to reproduce:").
_LABEL = re.compile(r"^\s*(?:\*\*|__)?[\w ()/'&?,-]{1,60}?(?:\*\*|__)?\s*[:\uff1a]?\s*(?:\*\*|__)?\s*$")
# A label that opens a line of report ("**Expected behavior:** the agent stops"): the quote starts after it.
_INLINE_LABEL = re.compile(r"^(?:\*\*|__)?[A-Za-z][\w /()-]{0,30}?(?:\*\*|__)?\s*[:\uff1a]\s*(?:\*\*|__)?\s*")
# The template's own sentences, left in when a reporter types under them or leaves a placeholder.
_TEMPLATE_PROSE = re.compile(
    r"(clear and concise description|steps to reproduce the behaviou?r|^\W*to reproduce\W*$|"
    r"if applicable,? add|add any other context|add screenshots|describe the bug\b|what (?:did you expect|happened)\?|"
    r"^\W*please (?:provide|describe|include|add|paste|fill|share|check|search|make sure|complete|specify|select|"
    r"upload|attach|confirm|use |tag|read)|thanks? (?:you )?for (?:taking the time|filing|reporting|"
    r"contributing)|before (?:submitting|creating|you continue|opening)|go to '|click on '|scroll down to '|"
    r"^\W*see error\W*$|minimal reproducible example|\bi have (?:searched|checked|read|updated)\b|"
    r"your (?:issue|report) will be|^\W*(?:none|n/?a|no|nope|-+|\.\.\.)\W*$|^\W*no response\W*$)",
    re.I,
)
_BOT = re.compile(
    r"^\s*(?:[-_*]{3,}\s*)?(?:_|\*)?(?:this issue was (?:automatically )?(?:generated|created|opened)|"
    r"generated by|sent from my|i am a bot|this is an automated|posted via|via .*bot)",
    re.I,
)
_TRACE_LINE = re.compile(
    r"(Traceback \(most recent call last\)|^\s*File \".*\", line \d+|^\s*at [\w.$<>]+\(|"
    r"\b[A-Z]\w*(?:Error|Exception|Timeout)\b|\b(?:ERROR|WARN(?:ING)?|FATAL|CRITICAL)\b|\b[45]\d\d\b)"
)
# A log or traceback line pasted without a fence: a timestamp, a level, a frame, an exception line.
_LOG_LINE = re.compile(
    r"^\s*(?:>\s*)*(?:\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[?\d\d[./-]\d\d[./-]\d\d(?:\d\d)?[ T,]+\d\d:\d\d|[{]|\[\{|"
    r"\[?\d\d:\d\d:\d\d|\[?(?:INFO|DEBUG|TRACE|WARN(?:ING)?|"
    r"ERROR|FATAL|CRITICAL)\b\]?|\|\s*(?:INFO|DEBUG|WARNING|ERROR)\s*\||"
    r"(?i:\[(?:info|debug|error|warn|warning)\])|[\u2713\u2714\u2717\u2718\u276f\u279c$%]\s|\|.*\|\s*$|"
    r"\[[\w/:.\- ]+\]\s*\[|Traceback \(most recent call last\)|"
    r"File \"[^\"]+\", line \d+|at [\w.$<>]+\(|raise \w|\^{3,}|[\w.]*(?:Error|Exception|Warning)(?:\([^)]*\))?:\s)"
)
_INDENTED_CODE = re.compile(r"^(?: {4,}|\t)(?![-*+]\s|\d+[.)]\s)\S.*[(){}\[\]=;:]")
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+')
# A line of source code (not of its output): quoted, it would be the reporter's program, not a claim.
_SOURCE_LINE = re.compile(
    r"^\s*(?:(?:def|class|import|from\s+[\w.]+\s+import|return|if|elif|else|for|while|with|try|except|finally|"
    r"async|await|const|let|var|function|export|print|pip|npm|uv|python|cd|git|docker|curl)\b|#|//|/\*|@\w|"
    r"[})\]]|\[[\w.\-]+\]\s*$|<[^>]+>\s*$|[\w.\[\]'\"]+\s*[+\-*/]?=[^=]|[\w.]+\s*\()|[:{(,\[\\]\s*$"
)
# Source or configuration pasted without a fence: statements, assignments, "[section]" headers.
_UNFENCED_SOURCE = re.compile(
    r"^\s*(?:(?:def|class|async def|import|from\s+[\w.]+\s+import|return|const|let|var|function|export)\s|"
    r"(?:for|while|if|elif|with|try|except|async for|async with)\b(?=[^.!?]{0,200}:\s*$|.{0,200}[(_=\[.])"
    r".{0,200}:\s*$|"
    r"\[[\w.\-]+\]\s*$|</?[\w:-]+[^>]*>\s*$|[.~]?[\\/][\w.\\/\-]+\s*$|[\w.\[\]'\"]+\s*[+\-*/]?=\s*\S|[\w.]+\(.*\)\s*;?\s*$|[})\]]+[;,]?\s*$)"
)
_WORD = re.compile(r"\w+", re.U)
MIN_CLAIM_WORDS = 4
MAX_CLAIM_CHARS = 300

# Line kinds of `_kinds`.
PROSE, CODE, LOG, DROP, FENCE, BLANK = "prose", "code", "log", "drop", "fence", "blank"


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    code: bool  # a line inside a code block (a log or traceback line)


def _is_label(line: str) -> bool:
    s = line.strip().lstrip(">").strip()
    if not s or len(s.split()) > 6 or (re.search(r"[.!`]\s*$", s.rstrip("*_: ")) and not s.endswith(":")):
        return False
    bold = (s.startswith("**") and s.rstrip(":").endswith("**")) or (s.startswith("__") and s.endswith("__"))
    return bool(_LABEL.match(s)) and (bold or s.endswith((":", "\uff1a")))


def _is_env(line: str) -> bool:
    return bool(_ENV_LINE.match(line)) or bool(_PACKAGE_LINE.match(line))


def _mostly_versions(s: str) -> bool:
    words = _WORD.findall(s)
    versions = _VERSIONISH.findall(s)
    return bool(versions) and len(words) <= 3 * len(versions) + 2


def _blank(text: str) -> str:
    """HTML comments, pictures and HTML tags replaced by spaces of the same length (newlines kept)."""
    return _MARKUP.sub(lambda m: " " * len(m.group(0)), _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text))


def _kinds(text: str) -> Iterator[tuple[int, str, str]]:
    """(start offset, line, kind) for each line of an issue body; kind is one of PROSE, CODE, LOG, DROP, FENCE, BLANK.

    `text` must already be blanked (`_blank`). Template scaffolding is DROP: headings (ATX and
    underlined), checklists, label lines, environment and package lines, the template's own
    sentences, issue-form residue ("_No response_") and everything in a metadata section (versions,
    platform, model, install method...) except fenced logs. Logs pasted without a fence are LOG.
    """
    lines = text.split("\n")
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    code = meta = False
    for i, line in enumerate(lines):
        s = line.strip()
        if _FENCE.match(s):
            code = not code
            yield starts[i], line, FENCE
            continue
        if code:
            yield starts[i], line, DROP if meta else CODE
            continue
        if not s:
            yield starts[i], line, BLANK
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        underlined = bool(_SETEXT.match(nxt)) and len(s.split()) <= 8 and not _FENCE.match(s)
        if _HEADING.match(line) or underlined:
            title = s.lstrip("#").strip()
            meta = bool(_META_HEADING.search(title)) and not _CONTENT_HEADING.search(title)
            yield starts[i], line, DROP
            continue
        body = s.lstrip(">").strip()
        if _SETEXT.match(line) or _RULE.match(line) or not body:
            yield starts[i], line, DROP
        elif _LOG_LINE.match(body):
            yield starts[i], line, DROP if meta else LOG
        elif (line[:1].isspace() and i and _FRAME.match(lines[i - 1])) or _INDENTED_CODE.match(line):
            # The source line a traceback frame shows; a Markdown indented code block.
            yield starts[i], line, DROP if meta else CODE
        elif _UNFENCED_SOURCE.match(body):
            yield starts[i], line, DROP if meta else CODE
        elif (
            _UNCHECKED.match(line)
            or _CHECKED.match(line)
            or _BOT.match(line)
            or _is_env(line)
            or _is_label(line)
            or _TEMPLATE_PROSE.search(body)
            or _mostly_versions(body)
            or (meta and (len(_WORD.findall(body)) < 10 or ":" in body or "=" in body))
        ):
            yield starts[i], line, DROP
        else:
            yield starts[i], line, PROSE


def _lines(text: str):
    """(start offset, line, inside code block, inside a metadata section) per line, as older callers read them."""
    for start, line, kind in _kinds(_blank(text)):
        yield start, line, None if kind == FENCE else kind in (CODE, LOG), kind == DROP


def clean_report(text: str) -> str:
    """The report without template scaffolding; code blocks, logs and tracebacks kept verbatim.

    Checklists go whether ticked or not (they are the template's sentences), and so
    does a section whose only content is one short phrase: a form field's value
    ("Agent runtime" under "### Feature Area"), not a report.
    """
    sections: list[list[tuple[str, bool]]] = [[]]
    for _, line, kind in _kinds(_blank(text)):
        if kind == DROP and _HEADING.match(line):
            sections.append([])
        elif kind in (CODE, LOG):
            sections[-1].append((line, True))
        elif kind == PROSE:
            sections[-1].append((line, False))
    out = []
    for i, section in enumerate(sections):
        if i and len(section) == 1 and not section[0][1] and _is_field_value(section[0][0]):
            continue
        out.extend(line for line, _ in section)
    return "\n".join(out)


def strip_template(text: str) -> str:
    """The reporter's own prose only: no scaffolding, no code, no logs (what a translation or a reader needs)."""
    return "\n".join(line for _, line, kind in _kinds(_blank(text)) if kind == PROSE)


def code_lines(text: str) -> str:
    """Only the fenced code and pasted logs of a text: the part that reads the same in any language."""
    return "\n".join(line for _, line, kind in _kinds(_blank(text)) if kind in (CODE, LOG))


def _is_field_value(line: str) -> bool:
    s = line.strip()
    # A sentence of Chinese or Japanese is few \w runs but many characters: not a field value.
    return (
        len(_WORD.findall(s)) <= 3 and not re.search(r"[.!?:\u3002\uff01\uff1f]$", s) and len(_CJK_CHAR.findall(s)) < 8
    )


_PARA_SENTENCE = re.compile(
    r"(?:[^.!?\u3002\uff01\uff1f]|[.!?]+(?=[^\s.!?\u3002\uff01\uff1f]))+(?:[.!?]+(?=\s|$)|[\u3002\uff01\uff1f]+)?"
)
_CLAUSE = re.compile(r"[^;:,\uff0c\uff1b]+(?:[;:,\uff0c\uff1b]|$)")


def _claimish(s: str) -> bool:
    words = _WORD.findall(s)
    # Chinese and Japanese write without spaces: a clause of 8+ characters is as long as four words.
    if len(words) < MIN_CLAIM_WORDS and len(_CJK_CHAR.findall(s)) < 8:
        return False
    if _HEADING.match(s) or _UNCHECKED.match(s) or _CHECKED.match(s) or _is_env(s) or _is_label(s):
        return False
    if _BOT.match(s) or _TEMPLATE_PROSE.search(s):
        return False
    # Mostly version numbers and punctuation is an environment line, not a claim.
    return not _mostly_versions(s)


def is_log_line(line: str) -> bool:
    """Whether a line of a code block is output (a log, an error) rather than the reporter's source code."""
    s = line.strip()
    return bool(s) and (bool(_TRACE_LINE.search(s)) or not _SOURCE_LINE.match(s)) and not _is_env(s)


def claim_spans(text: str) -> list[Span]:
    """Spans of `text` a quote may be: report sentences (or clauses of long ones) and log lines, never scaffolding.

    Prose lines wrapped without a blank line between them are one paragraph, so a
    sentence that runs over a line break is quoted whole, not from its middle. A
    label opening a line ("**Expected:**") is left out of the quote. Lines of source
    code are never quotes: they are the reporter's program, not what happened.
    """
    text_nc = _blank(text)
    spans: list[Span] = []
    para: list[tuple[int, str]] = []

    def flush() -> None:
        if para:
            start, end = para[0][0], para[-1][0] + len(para[-1][1])
            _sentences_into(spans, text_nc, start, end)
            para.clear()

    for start, line, kind in _kinds(text_nc):
        if kind != PROSE or re.match(r"\s*([-*+>]|\d+[.)])\s", line):
            flush()
        if kind in (CODE, LOG):
            s = line.strip()
            table = s.startswith("|")  # a table row: a field of a table, not a line of output
            if (
                len(_WORD.findall(s)) >= 2
                and len(s) <= MAX_CLAIM_CHARS
                and not table
                and (kind == LOG or is_log_line(s))
            ):
                lead = len(line) - len(line.lstrip())
                spans.append(Span(start + lead, start + lead + len(s), True))
        elif kind == PROSE:
            para.append((start, line))
    flush()
    return spans


def _sentences_into(spans: list[Span], text: str, start: int, end: int) -> None:
    chunk = text[start:end]
    for m in _PARA_SENTENCE.finditer(chunk):
        raw = m.group(0)
        s = raw.strip().lstrip("-*+> ").strip()
        if not s:
            continue
        at = start + m.start() + raw.index(s)
        label = _INLINE_LABEL.match(s)
        if label and len(_WORD.findall(label.group(0))) <= 4 and len(_WORD.findall(s[label.end() :])) >= 3:
            at += label.end()
            s = s[label.end() :]
        if len(s) <= MAX_CLAIM_CHARS:
            if _claimish(s):
                spans.append(Span(at, at + len(s), False))
            continue
        # A sentence too long to quote: its clauses, each whole.
        for c in _CLAUSE.finditer(s):
            clause = c.group(0).strip().rstrip(",;\uff0c\uff1b").strip()
            if clause and len(clause) <= MAX_CLAIM_CHARS and _claimish(clause):
                c_at = at + c.start() + c.group(0).index(clause)
                spans.append(Span(c_at, c_at + len(clause), False))


def is_claim(text: str, quote: str) -> bool:
    """Whether `quote` is a claim of `text`: verbatim, whole words at both ends, not boilerplate."""
    quote = quote.strip()
    if not quote:
        return False
    at = text.find(quote)
    if at < 0:
        return False
    end = at + len(quote)
    cut_start = at > 0 and text[at - 1].isalnum() and quote[0].isalnum()
    cut_end = end < len(text) and text[end].isalnum() and quote[-1].isalnum()
    if cut_start or cut_end:
        return False
    return any(s.start <= at and end <= s.end for s in claim_spans(text))


# `quote_flaw` judges a quote by the lines it sits on, with rules of its own (not `claim_spans`'), so a
# measure of quote quality does not grade the quote picker with the picker's own rule.
_FLAW_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s|[-=]{3,}\s*$)")
_FLAW_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s*\[[ xX]\]")
_FLAW_LABEL = re.compile(r"^\s*(?:\*\*|__)?[\w(][\w\s()/'&?,.-]{0,40}?(?:\*\*|__)?\s*[:\uff1a]?\s*(?:\*\*|__)?\s*$")
_FLAW_ENV = re.compile(
    r"^\s*(?:[-*>]\s*)*(?:\*\*)?(?:os|operating system|platform|python|node|[\w .-]*version|browser|model|provider|"
    r"package|sdk|commit|device|installation|environment)(?:\*\*)?\s*[:=\uff1a]",
    re.I,
)
_FLAW_TEMPLATE = re.compile(
    r"clear and concise description|steps to reproduce the behaviou?r|if applicable,? add|add any other context|"
    r"i have (?:searched|checked|read)|^\W*_?no response_?\W*$|thank(?:s| you) for (?:taking|filing|reporting)",
    re.I,
)


def quote_flaw(text: str, quote: str) -> str:
    """Why a quote is not the reporter's own words, or "" when it is: "not in the text", "cut word", "heading",
    "checkbox", "label", "environment line" or "template sentence".

    For `quotes_template_share`-style measures: a quote is flawed when it cuts a word, or when it is (or
    runs over) a heading, a checklist item, a bare label, an environment line or a sentence of the template.
    """
    quote = quote.strip()
    at = text.find(quote) if quote else -1
    if at < 0:
        return "not in the text"
    end = at + len(quote)
    if (at > 0 and text[at - 1].isalnum() and quote[0].isalnum()) or (
        end < len(text) and text[end].isalnum() and quote[-1].isalnum()
    ):
        return "cut word"
    first = text.rfind("\n", 0, at) + 1
    last = text.find("\n", end)
    for line in text[first : len(text) if last < 0 else last].split("\n"):
        piece = line.strip()
        if not piece:
            continue
        if _FLAW_HEADING.match(line):
            return "heading"
        if _FLAW_CHECKBOX.match(line):
            return "checkbox"
        if _FLAW_ENV.match(line):
            return "environment line"
        label = len(piece.split()) <= 6 and _FLAW_LABEL.match(piece) and piece.endswith((":", "**", "__", "\uff1a"))
        if label and piece.strip("*_: \uff1a") in quote:
            return "label"
    return "template sentence" if _FLAW_TEMPLATE.search(quote) else ""


_LATIN = re.compile(r"[A-Za-z\u00C0-\u024F]")
_LETTER = re.compile(r"[^\W\d_]", re.U)


def language_covered(text: str) -> bool:
    """True when the prose outside code is mostly Latin-script letters (or there is hardly any prose), or is
    Chinese or Japanese whose failure vocabulary the lexicon of annotate.suggestions._lang reads well enough."""
    prose = strip_template(text)
    if is_cjk(detect_language(prose)):
        return cjk_covered(prose)
    letters = _LETTER.findall(prose)
    if len(letters) < 20:
        return True
    latin = sum(1 for ch in letters if _LATIN.match(ch))
    return latin / len(letters) >= 0.6


def template_wrap(title: str, text: str) -> str:
    """The text inside a typical GitHub bug-report template: headings, checkboxes, an Environment block.

    The audit checks that this changes nothing about the top-1 type; tests use it too.
    """
    return (
        "<!-- Thanks for filing a bug! Please fill in every section below. -->\n"
        "### Checklist\n\n"
        "- [ ] I have searched existing issues\n"
        "- [ ] I am on the latest version\n"
        "- [x] I have read the documentation\n\n"
        "### Describe the bug\n\n"
        f"{text.strip()}\n\n"
        "### Feature Area\n\n"
        "Agent runtime\n\n"
        "### Environment\n\n"
        "- OS: Ubuntu 22.04\n"
        "- Python version: 3.11.6\n"
        "- Package version: 0.9.3\n"
        "- VS Code version: Code - Insiders 1.86.0\n\n"
        "### Additional context\n\n"
        "_No response_\n"
    )


TEMPLATE_ONLY = template_wrap("", "_No response_")


def reads_as_english(text: str) -> bool:
    """Whether the report's own prose (no template, no code) reads as English (annotate.suggestions._lang)."""
    return detect_language(strip_template(text)) == "en"


def language_cap(text: str) -> float:
    """The highest top-1 confidence a text may get: 1 in English, `LANGUAGE_CAP` (under the floor) otherwise."""
    return 1.0 if reads_as_english(text) else LANGUAGE_CAP
