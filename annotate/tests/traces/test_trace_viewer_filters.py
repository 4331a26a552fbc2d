"""The trace viewer's server side: the agent and errors-only filters over the windowed step loading (right steps,
the filters carried into the next window, the same query count for a short and a long trace), the step detail
rendered escaped, and a window's last step knowing it has children in the next window."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotate.tests.factories.trace_fixtures import otlp_trace
from annotate.traces.selectors import trace_window
from annotate.traces.services import trace_import_value

pytestmark = pytest.mark.django_db


def long_trace(n_tools: int, trace_id: str) -> dict:
    """The fixture run plus n_tools tool spans alternating between the planner and the coder, every 7th failing."""
    data = otlp_trace()
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    template = spans[3]
    for i in range(n_tools):
        span = {**template, "spanId": f"x{i}", "attributes": template["attributes"][:2], "name": f"extra {i}"}
        span["parentSpanId"] = "a1" if i % 2 else "a2"
        if i % 7 == 0:
            span["status"] = {"code": 2, "message": f"boom {i}"}
        spans.append(span)
    for s in spans:
        s["traceId"] = trace_id
    return data


def steps_of(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'class="trace-step [^"]*" id="step-(\d+)"', html)]


def test_it_keeps_only_one_agents_steps_or_only_failed_steps_window_after_window(study):
    _, (doc,) = trace_import_value(study=study, data=long_trace(300, "long"), fmt="otlp")
    every = list(doc.steps.order_by("index").values("index", "agent", "status"))
    coder = [s["index"] for s in every if s["agent"] == "coder"]
    failed = [s["index"] for s in every if s["status"] == "error"]
    assert len(coder) > 100 and len(failed) > 40 and len(coder) < len(every)

    seen, start = [], 0
    while start is not None:
        w = trace_window(doc, start=start, limit=40, agent="coder")
        seen += [r.step.index for r in w.rows]
        start = w.next_start
    assert seen == coder

    seen, start = [], 0
    while start is not None:
        w = trace_window(doc, start=start, limit=40, errors_only=True)
        assert all(r.is_error for r in w.rows)
        seen += [r.step.index for r in w.rows]
        start = w.next_start
    assert seen == failed
    both = trace_window(doc, limit=500, agent="planner", errors_only=True)
    assert [r.step.index for r in both.rows] == [
        s["index"] for s in every if s["agent"] == "planner" and s["status"] == "error"
    ]


def test_the_filtered_window_view_carries_its_filters_into_the_next_window_and_costs_the_same_queries(
    client, study, bob
):
    _, (short,) = trace_import_value(study=study, data=long_trace(0, "short"), fmt="otlp")
    _, (long,) = trace_import_value(study=study, data=long_trace(1500, "long"), fmt="otlp")
    client.force_login(bob)
    counts = []
    for doc in (short, long):
        url = reverse("trace_steps", args=["alpha", doc.pk])
        client.get(url, {"agent": "coder", "errors": "1"})
        with CaptureQueriesContext(connection) as ctx:
            html = client.get(url, {"agent": "coder", "errors": "1", "markable": "1"}).content.decode()
        counts.append(len(ctx.captured_queries))
        assert "Failed steps of coder" in html
    assert counts[0] == counts[1]
    shown = steps_of(html)
    expected = list(long.steps.filter(agent="coder", status="error").order_by("index").values_list("index", flat=True))
    assert shown == expected[:100]
    more = re.search(r'class="load-more" hx-get="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert "agent=coder" in more and "errors=1" in more and "markable=1" in more
    assert 'hx-trigger="click, intersect once"' in html  # inside a scrolling pane, "revealed" never fires again
    rest = steps_of(client.get(more).content.decode())
    assert len(expected) > 100 and rest == expected[100:]


def test_the_step_detail_shows_timing_model_and_attributes_escaped(client, study, bob):
    data = otlp_trace()
    chat = data["resourceSpans"][0]["scopeSpans"][0]["spans"][2]
    chat["attributes"] += [
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "120"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "30"}},
        {"key": "gen_ai.usage.cost", "value": {"doubleValue": 0.0042}},
        {"key": "items", "value": {"stringValue": "<script>alert(1)</script>"}},
    ]
    _, (doc,) = trace_import_value(study=study, data=data, fmt="otlp")
    client.force_login(bob)
    html = client.get(reverse("trace_steps", args=["alpha", doc.pk])).content.decode()
    detail = html[html.index('class="step-detail" data-for="2"') :]
    detail = detail[: detail.index("</li>")]
    for fact in ("Duration</dt><dd>190.0 ms", "(+110 ms)", "Model</dt><dd>gpt-4o", "Input tokens</dt><dd>120",
                 "Output tokens</dt><dd>30", "Total tokens</dt><dd>150", "Cost</dt><dd>$0.0042"):  # fmt: skip
        assert fact in detail
    assert '<th scope="row">items</th><td>&lt;script&gt;alert(1)&lt;/script&gt;</td>' in detail
    assert "<script>alert" not in html


def test_a_windows_last_step_knows_its_children_open_the_next_window(study):
    _, (doc,) = trace_import_value(study=study, data=long_trace(10, "kids"), fmt="otlp")
    parent = doc.steps.get(name="invoke_agent coder").index
    w = trace_window(doc, limit=parent + 1)
    assert w.rows[-1].step.index == parent and w.rows[-1].has_children


def test_the_steps_api_takes_the_same_filters_and_refuses_a_bad_one(study, bob):
    from rest_framework.test import APIClient

    _, (doc,) = trace_import_value(study=study, data=long_trace(30, "api"), fmt="otlp")
    api = APIClient()
    api.force_authenticate(bob)
    url = reverse("api-trace-steps", args=["alpha", doc.pk])
    body = api.get(url, {"agent": "planner", "errors": "1"}).json()
    expected = list(doc.steps.filter(agent="planner", status="error").order_by("index").values_list("index", flat=True))
    assert expected and [s["index"] for s in body["steps"]] == expected
    response = api.get(url, {"errors": "yes"})
    assert response.status_code == 400 and "errors is 0 or 1" in str(response.json()), response.json()
