"""Is an evidence quote the reporter's own words? The quality bench's own check, written apart from the
suggester's template stripper (annotate.suggestions._text) so that it can catch that stripper's misses.

A quote is *template* when it is any of:

- a heading: a Markdown `#` heading, a setext heading (the line under it is === or ---), a line that is bold
  text alone, or a short label ending in a colon ("Steps to reproduce:");
- a template label: a line that starts with a field label of an issue form (`**OS:** ...`, "Describe the bug",
  "Expected behavior" ...), or a `key: value` line whose key (four words at most) ends in a field name of an
  environment block ("Python version: 3.11", "LLM provider: x", "Sandbox: docker");
- a checkbox: `[ ]` / `[x]` anywhere in it;
- (inside a fenced code block only the last two apply: a `# ...` line there is a comment, `key:` is code)
- cut inside a word: the character before its first or after its last letter in the text is a letter or digit;
- not in the text at all (then it is not the report's words either).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Field labels of common issue forms (GitHub's default templates and agent projects' bug forms), lower case.
FORM_LABELS = (
    "describe the bug", "bug description", "description", "describe the issue", "what happened", "what happened?",
    "to reproduce", "steps to reproduce", "reproduction", "reproduction steps", "how to reproduce",
    "expected behavior", "expected behaviour", "expected result", "actual behavior", "actual behaviour",
    "actual result", "current behavior", "additional context", "additional information", "screenshots",
    "environment", "system info", "system information", "logs", "relevant log output", "error message",
    "operating system", "os", "version", "python version", "node version", "package version", "browser",
    "model", "model used", "provider", "api provider", "which api provider are you using?",
    "which model are you using?",
    "installation method", "install method", "sandbox", "runtime", "deployment", "checklist", "self checks",
    "related issues", "possible solution", "proposed solution", "minimal reproducible example", "code snippet",
    "example code", "stack trace", "traceback", "output", "platform", "device", "hardware", "cpu", "gpu",
    "langchain version", "crewai version", "autogen version", "dify version", "openhands version",
    "cloud or self hosted",
    "self hosted", "are you using the latest version?", "commit", "branch", "agent", "llm", "tools", "framework",
)  # fmt: skip
# The last word of an environment block's key ("Python version:", "LLM provider:", "OS:").
ENV_WORDS = frozenset(
    ("version", "versions", "os", "python", "node", "npm", "model", "models", "provider", "sandbox", "browser",
     "platform", "runtime", "kernel", "docker", "image", "commit", "branch", "device", "gpu", "cpu", "ram", "memory",
     "distro", "release", "build", "ide", "vscode", "extension", "plugin", "shell", "terminal", "arch",
     "architecture", "system", "environment", "env", "llm", "backend")
)  # fmt: skip
_KEY_VALUE = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?([^:\n*_]{1,40}?)(?:\*\*|__)?\s*:(?:\*\*|__)?\s*(.*)$")
_CHECKBOX = re.compile(r"\[[ xX✓✔]\]")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_BOLD_ALONE = re.compile(r"^\s*(?:\*\*|__)[^*_\n]{1,80}(?:\*\*|__)\s*:?\s*$")
_LABEL_LINE = re.compile(r"^\s*(?:[-*+]\s+)?\w[\w()/?'-]*(?: [\w()/?'-]+){0,3}:\s*$")  # four words at most
_WORD = re.compile(r"\w", re.U)


@dataclass(frozen=True)
class QuoteVerdict:
    template: bool
    reason: str  # "" when the quote is the report's own words


def _label_prefix(line: str) -> bool:
    bare = re.sub(r"[*_`>]", "", line).strip().lower()
    return any(bare in (label, label + ":") or bare.startswith(label + ":") for label in FORM_LABELS)


def _env_line(line: str) -> bool:
    m = _KEY_VALUE.match(line)
    if not m:
        return False
    words = m.group(1).strip().lower().split()
    return 0 < len(words) <= 4 and words[-1].strip("()") in ENV_WORDS and len(m.group(2)) <= 80


def quote_verdict(quote: str, text: str) -> QuoteVerdict:
    """Whether `quote` (evidence chosen from `text`) is template scaffolding or a cut word, and why."""
    q = quote.strip()
    if not q:
        return QuoteVerdict(False, "")
    at = text.find(q)
    if at < 0:
        return QuoteVerdict(True, "not in the text")
    first_line = q.splitlines()[0]
    # The whole line of the text the quote starts on: a heading or label is judged on its line.
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line = text[line_start : len(text) if line_end < 0 else line_end]
    after = text[(len(text) if line_end < 0 else line_end + 1) :].split("\n", 1)[0]
    in_code = text[:at].count("```") % 2 == 1  # inside a fenced block a "# ..." line is a comment, not a heading
    if not in_code and (_HEADING.match(line) or _HEADING.match(first_line)):
        return QuoteVerdict(True, "heading")
    if re.fullmatch(r"\s*(=+|-{3,})\s*", after) and line.strip() and text[line_start:at].strip() == "":
        return QuoteVerdict(True, "heading")
    if not in_code and (_BOLD_ALONE.match(first_line) or _LABEL_LINE.match(first_line)):
        return QuoteVerdict(True, "heading")
    if _CHECKBOX.search(q):
        return QuoteVerdict(True, "checkbox")
    if _label_prefix(first_line) or _env_line(first_line):
        return QuoteVerdict(True, "template label")
    start, end = at, at + len(q)
    if _WORD.match(q[0]) and start > 0 and _WORD.match(text[start - 1]):
        return QuoteVerdict(True, "cut word")
    if _WORD.match(q[-1]) and end < len(text) and _WORD.match(text[end]):
        return QuoteVerdict(True, "cut word")
    return QuoteVerdict(False, "")


def template_share(pairs: list[tuple[str, str]]) -> tuple[int, int, dict[str, int]]:
    """Over (quote, text) pairs with a non-empty quote: how many are template, how many quotes, and why."""
    bad, n, reasons = 0, 0, {}
    for quote, text in pairs:
        if not quote.strip():
            continue
        n += 1
        v = quote_verdict(quote, text)
        if v.template:
            bad += 1
            reasons[v.reason] = reasons.get(v.reason, 0) + 1
    return bad, n, reasons
