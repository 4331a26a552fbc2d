import re

import pytest

from annotate.documents.render import render_markdown

XSS = [
    "<script>alert(1)</script>",
    "[click](javascript:alert(1))",
    '<a href="javascript:alert(1)">x</a>',
    '<img src=x onerror="alert(1)">',
    '<iframe src="https://evil.example"></iframe>',
    "<svg><script>alert(1)</script></svg>",
    '<svg onload="alert(1)"><circle/></svg>',
    '<a href="JaVaScRiPt:alert(1)">x</a>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    '<object data="data:text/html,<script>alert(1)</script>"></object>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
    '<form action="https://evil.example"><input name=a></form>',
    '<details open ontoggle="alert(1)">x</details>',
]


@pytest.mark.parametrize("payload", XSS)
def test_it_removes_xss_payloads(payload):
    html = str(render_markdown(f"Before\n\n{payload}\n\nAfter")).lower()
    assert "<script" not in html
    assert not re.search(r"(href|src|action|data)\s*=\s*[\"']?\s*javascript:", html)
    assert "onerror" not in html and "onload" not in html and "ontoggle" not in html
    assert "<iframe" not in html and "<object" not in html and "<form" not in html and "<svg" not in html
    assert "style=" not in html
    assert "data:text/html" not in html
    assert "before" in html


def test_code_blocks_and_links_still_render():
    html = str(render_markdown("See [the docs](https://example.org/x).\n\n```python\nprint('<b>')\n```"))
    assert '<a href="https://example.org/x" rel="noopener noreferrer nofollow">the docs</a>' in html
    assert "<pre><code" in html
    assert "&lt;b&gt;" in html
