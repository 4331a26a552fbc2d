"""The bench's template-quote check on planted quotes: every bad kind is caught, and the reporter's words pass."""

from __future__ import annotations

import pytest

from bench.template_quotes import quote_verdict, template_share

REPORT = """## Describe the bug
The agent keeps calling the search tool with the same query until it hits the step limit.

**Steps to reproduce:**
1. Start the agent with `max_steps=20`.
2. Ask it to find the cheapest flight.

Expected behavior
-----------------
It should stop after two identical results.

### Environment
- OS: Ubuntu 22.04
- **Python version:** 3.11.4
- LLM provider: openrouter
- Sandbox: docker

- [x] I have searched the existing issues
- [ ] I am using the latest version

**Additional context:** we saw the same loop with a smaller model.
The model returned: an empty plan, and then the run stopped.

```python
# the planner is called once per step
services:
```
"""

BAD = [
    ("Describe the bug", "heading"),
    ("## Describe the bug", "heading"),
    ("Expected behavior", "heading"),
    ("Environment", "heading"),
    ("**Steps to reproduce:**", "heading"),
    ("OS: Ubuntu 22.04", "template label"),
    ("**Python version:** 3.11.4", "template label"),
    ("LLM provider: openrouter", "template label"),
    ("Sandbox: docker", "template label"),
    ("**Additional context:** we saw the same loop with a smaller model.", "template label"),
    ("[x] I have searched the existing issues", "checkbox"),
    ("- [ ] I am using the latest version", "checkbox"),
    ("gent keeps calling the search tool", "cut word"),
    ("The agent keeps calling the search to", "cut word"),
    ("The agent never stops looping at all.", "not in the text"),
    ("planner is called once per st", "cut word"),  # inside a fence, a cut word is still a cut word
]
GOOD = [
    "The agent keeps calling the search tool with the same query until it hits the step limit.",
    "It should stop after two identical results.",
    "we saw the same loop with a smaller model.",
    "The model returned: an empty plan, and then the run stopped.",
    "Start the agent with `max_steps=20`.",
    "# the planner is called once per step",  # a code comment inside a fence, not a heading
]


@pytest.mark.parametrize(("quote", "reason"), BAD)
def test_it_flags_each_planted_template_quote(quote, reason):
    verdict = quote_verdict(quote, REPORT)
    assert verdict.template and verdict.reason == reason


@pytest.mark.parametrize("quote", GOOD)
def test_it_passes_the_reporters_own_sentences(quote):
    assert quote_verdict(quote, REPORT).template is False


def test_it_counts_the_share_over_non_empty_quotes_only():
    pairs = [(q, REPORT) for q, _ in BAD[:3]] + [(q, REPORT) for q in GOOD] + [("", REPORT)]
    bad, n, reasons = template_share(pairs)
    assert (bad, n) == (3, 3 + len(GOOD)) and reasons == {"heading": 3}
