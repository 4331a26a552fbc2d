"""Every URL in the URLconf, walked as an anonymous user, a non-member, a viewer, a coder
and an owner; each answer must match the role matrix below.

Adding a URL without a row here fails `test_every_url_pattern_has_a_row`.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from annotate.coding.selectors import codebook_picker
from annotate.coding.services import CodingValues, coding_save
from annotate.models import Artifact, Document, Job, Suggestion, TraceStep
from annotate.studies.tokens import token_create

PERSONAS = ("anon", "charlie", "vera", "bob", "alice")
LOGIN = "login"  # shorthand: 302 to the login page

# Expected status per persona (anon, non-member charlie, viewer vera, coder bob, owner alice).
PAGE_READ = (LOGIN, 404, 200, 200, 200)
PAGE_WRITE = (LOGIN, 404, 403, 200, 200)
PAGE_OWNER = (LOGIN, 404, 403, 403, 200)
ANY_USER = (LOGIN, 200, 200, 200, 200)
POST_WRITE = (LOGIN, 404, 403, 302, 302)
POST_OWNER = (LOGIN, 404, 403, 403, 302)
API_READ = (401, 404, 200, 200, 200)
# Reports built from everyone's codings: the study is blind, so its coder (Bob) may not see them.
PAGE_REPORT = (LOGIN, 404, 200, 403, 200)
API_REPORT = (401, 404, 200, 403, 200)
API_ANY = (401, 200, 200, 200, 200)

# name -> (method, expected, extra). Method "POST" posts an empty or minimal body;
# the point is who gets past the permission check, not the validation of the body.
MATRIX: dict[str, tuple[str, tuple, dict]] = {
    "login": ("GET", (200, 302, 302, 302, 302), {}),
    "logout": ("POST", (LOGIN, 302, 302, 302, 302), {}),
    "healthz": ("GET", (200, 200, 200, 200, 200), {}),
    "study_list": ("GET", ANY_USER, {}),
    "codebook_list": ("GET", ANY_USER, {}),
    "codebook_detail": ("GET", ANY_USER, {}),
    "type_detail": ("GET", ANY_USER, {}),
    "codebook_diff": ("GET", ANY_USER, {}),
    "codebook_data_js": ("GET", ANY_USER, {}),
    "profile_tokens": ("GET", ANY_USER, {}),
    "profile_token_revoke": ("POST", (LOGIN, 404, 404, 404, 302), {}),  # only alice's own token
    "study_overview": ("GET", PAGE_READ, {}),
    "study_members": ("GET", PAGE_OWNER, {}),
    "study_coding_settings": ("GET", PAGE_OWNER, {}),
    "study_webhook_settings": ("GET", PAGE_OWNER, {}),
    "study_webhook_test_result": ("GET", PAGE_OWNER, {}),
    "codebook_version": ("GET", PAGE_OWNER, {}),
    "codebook_revert": ("POST", (LOGIN, 404, 403, 403, 404), {}),  # owners only; no such move: 404
    "report_run": ("POST", (LOGIN, 404, 302, 403, 302), {}),  # starts the report job, like the analysis
    "report_download": ("GET", (LOGIN, 404, 404, 403, 404), {}),  # the world's job is no report: 404
    "api-report": ("GET", API_REPORT, {}),
    "agreement_run": ("POST", (LOGIN, 404, 403, 403, 302), {}),  # computed from everyone's codings: not for blind Bob
    "coverage_run": ("POST", (LOGIN, 404, 403, 403, 302), {}),  # an unknown event: "waiting for the worker"
    "incident_bulk": ("POST", (LOGIN, 404, 403, 302, 302), {}),  # nothing selected: back with a message
    "study_import": ("POST", (LOGIN, 404, 403, 403, 400), {}),  # no file: 400 with the message
    "coding_next": ("POST", POST_WRITE, {}),  # claims a place, so a POST; its GET claims nothing
    "coding_claim": ("POST", (LOGIN, 404, 403, 204, 204), {}),  # both coded it: nothing to claim
    "coding_page": ("GET", PAGE_WRITE, {}),
    "coding_skip": ("POST", POST_WRITE, {}),
    "episode_detail": ("GET", PAGE_READ, {}),
    "adjudication_list": ("GET", PAGE_OWNER, {}),
    "adjudication_page": ("GET", PAGE_OWNER, {}),
    "document_list": ("GET", PAGE_READ, {}),
    "document_detail": ("GET", PAGE_READ, {}),
    "document_episode_add": ("POST", POST_OWNER, {}),  # an empty selection: back to the page with a message
    "document_episode_split": ("POST", POST_OWNER, {"data": {"split": "holdout"}}),
    "document_episode_delete": ("POST", POST_OWNER, {}),
    "job_status": ("GET", (LOGIN, 404, 200, 404, 200), {}),  # Alice's job: a blind coder sees only their own
    "analysis_page": ("GET", PAGE_REPORT, {}),
    "analysis_run": ("POST", (LOGIN, 404, 403, 403, 302), {}),
    "analysis_cell": ("GET", PAGE_REPORT, {}),
    "analysis_figure": ("GET", PAGE_REPORT, {}),
    "agreement_page": ("GET", PAGE_REPORT, {}),
    "coverage_page": ("GET", PAGE_REPORT, {}),
    "triage_board": ("GET", PAGE_READ, {}),
    "study_job_list": ("GET", PAGE_READ, {}),
    "incident_detail": ("GET", PAGE_READ, {}),
    "incident_move": ("POST", POST_WRITE, {"data": {"to_status": "triaged", "assignee": "bob"}}),
    "suggestion_quality_page": ("GET", PAGE_REPORT, {}),
    "suggestion_batch": ("POST", POST_WRITE, {}),
    "suggestion_retrain": ("POST", POST_WRITE, {}),
    "suggestion_audit": ("POST", POST_OWNER, {"data": {"backend": "local"}}),
    "suggestion_panel": ("GET", PAGE_WRITE, {}),
    "suggestion_reject": ("POST", POST_WRITE, {}),
    "suggestion_first_choice": ("POST", POST_WRITE, {"data": {"failure_type": "TUS-03"}}),
    # Teams and accounts (issue 14). Only staff start studies by default; nobody here is staff.
    "study_new": ("GET", (LOGIN, 403, 403, 403, 403), {}),
    "invitation_accept": ("GET", (410, 410, 410, 410, 410), {}),  # open without a login; a bad token is gone
    "invitation_revoke": ("POST", (LOGIN, 404, 403, 403, 404), {}),  # no such invitation
    "member_update": ("POST", POST_OWNER, {"data": {"role": "viewer"}}),
    "member_remove": ("POST", POST_OWNER, {}),
    "account": ("GET", ANY_USER, {}),
    "password_change": ("GET", ANY_USER, {}),
    "password_change_done": ("GET", ANY_USER, {}),
    "password_reset": ("GET", (200, 200, 200, 200, 200), {}),
    "password_reset_done": ("GET", (200, 200, 200, 200, 200), {}),
    "password_reset_confirm": ("GET", (200, 200, 200, 200, 200), {}),  # an invalid link says so
    "password_reset_complete": ("GET", (200, 200, 200, 200, 200), {}),
    "favicon": ("GET", (301, 301, 301, 301, 301), {}),
    "coding_progress": ("GET", PAGE_WRITE, {}),
    # Agent traces (issue 15): the viewer's windows and a step's whole text are read like the episode page.
    "trace_upload": ("POST", (LOGIN, 404, 403, 403, 400), {}),  # no file: 400 with the message
    "trace_steps": ("GET", PAGE_READ, {}),
    "trace_step_text": ("GET", PAGE_READ, {}),
    "incident_code": ("POST", POST_WRITE, {}),  # an empty form: back to the incident with the errors
    "coding_leave": ("POST", POST_WRITE, {}),
    "lease_release": ("POST", (LOGIN, 404, 403, 403, 302), {}),  # an ended lease: back to the study, with a note
    # The REST API: no credentials 401, non-member 404, viewer writing 403.
    "api-root": ("GET", API_ANY, {}),
    "api-schema": ("GET", API_ANY, {}),
    "api-docs": ("GET", (LOGIN, 200, 200, 200, 200), {}),  # a page for people: a browser is sent to log in
    "api-not-found": ("GET", (404, 404, 404, 404, 404), {}),  # any other /api/ URL: a JSON 404 for everyone
    "codebook-list": ("GET", API_ANY, {}),
    "codebook-detail": ("GET", API_ANY, {}),
    "codebook-types": ("GET", API_ANY, {}),
    "study-list": ("GET", API_ANY, {}),
    "study-detail": ("GET", API_READ, {}),
    "api-documents": ("GET", API_READ, {}),
    "api-episodes": ("GET", API_READ, {}),
    "api-codings": ("POST", (401, 404, 403, 400, 400), {"json": {}}),
    "api-import": ("POST", (401, 404, 403, 403, 400), {}),
    "api-suggest": ("POST", (401, 404, 403, 202, 202), {"json": {"backend": "local"}}),
    "api-analysis": ("POST", (401, 404, 403, 403, 202), {"json": {"bootstrap": 100}}),
    "api-job": ("GET", (401, 404, 200, 404, 200), {}),  # Alice's job: a blind coder sees only their own
    "api-job-file": ("GET", (401, 404, 404, 404, 404), {}),  # the job has no file
    "api-matrix": ("GET", API_REPORT, {}),
    "api-agreement": ("GET", API_REPORT, {}),
    "api-coverage": ("GET", API_REPORT, {}),
    # In a blind study a coder may not export: the file holds every coder's codes.
    "api-export": ("GET", (401, 404, 200, 403, 200), {"query": "?format=csv"}),
    "api-suggestion-quality": ("GET", API_REPORT, {}),
    "api-exposure": ("GET", API_REPORT, {}),
    "api-audits": ("GET", API_REPORT, {}),
    "api-traces": ("POST", (401, 404, 403, 403, 400), {"json": {}}),
    "api-trace-steps": ("GET", API_READ, {}),
    "incident-list": ("GET", (401, 200, 200, 200, 200), {}),  # each sees only their studies' incidents
    "incident-detail": ("GET", API_READ, {}),
    "incident-triage": ("POST", (401, 404, 403, 200, 200), {"json": {"status": "triaged", "assignee": "bob"}}),
}


def url_patterns(resolver=None, prefix=""):
    """(route, name, namespace, pattern) for every pattern, depth first."""
    resolver = resolver or get_resolver()
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            for route, name, ns, pattern in url_patterns(p, prefix + str(p.pattern)):
                yield route, name, ns or p.namespace, pattern
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p.name, None, p


def test_every_url_pattern_has_a_row():
    missing = sorted({name or route for route, name, ns, _ in url_patterns() if ns != "admin" and name not in MATRIX})
    assert not missing, f"add these URLs to the role matrix: {missing}"


@pytest.fixture
def world(study, other_study, alice, bob, vera, charlie, make_episode, codes):
    ep = make_episode(study, body="The agent called the search tool forty times.")
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"),
        stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=ep, coder=alice, values=values, version=None)
    coding_save(
        episode=ep, coder=bob, version=None,
        values=CodingValues(**{**values.__dict__, "stage": codes.stage("planning")}),
    )  # fmt: skip
    incident = make_episode(study, kind="incident", cluster="checkout-agent").document
    Document.objects.filter(pk=incident.pk).update(triage_status="new")
    Artifact.objects.create(document=incident, kind="log", name="a.log", content="x")
    TraceStep.objects.create(document=ep.document, index=0, agent="planner", kind="message", input="hello")
    suggestion = Suggestion.objects.create(
        episode=ep, backend="local", model="m", prompt_version="p", cache_key="k", failure_type=values.failure_type,
        source=values.source, stage=values.stage, capability=values.capability, confidence=0.5,
    )  # fmt: skip
    job = Job.objects.create(kind="recount", study=study, created_by=alice)
    token, _ = token_create(user=alice, name="mine")
    tokens = {name: token_create(user=user, name="matrix")[1] for name, user in
              (("charlie", charlie), ("vera", vera), ("bob", bob), ("alice", alice))}  # fmt: skip
    return {
        "slug": study.slug, "episode": ep, "document": ep.document, "incident": incident, "suggestion": suggestion,
        "job": job, "token": token, "codebook": study.codebook, "tokens": tokens,
        "vera_membership": study.memberships.get(user=vera).pk,
        "users": {"charlie": charlie, "vera": vera, "bob": bob, "alice": alice},
    }  # fmt: skip


def kwargs_for(name: str, pattern, w) -> dict:
    keys = set(pattern.pattern.converters) | set(pattern.pattern.regex.groupindex)
    keys.discard("format")
    values = {
        "slug": w["slug"], "code": "TUS-03", "kind": "github_issue", "stage": "iterative_execution",
        "capability": "actuation", "name": "difference", "fmt": "json", "episode_pk": w["episode"].pk,
        "token": "not-a-token", "uidb64": "MQ", "index": 0, "part": "input", "unknown": "v1/nope/",
        "stamp": codebook_picker(w["codebook"]).stamp, "event_id": "e1",
    }  # fmt: skip
    pk = {
        "codebook_detail": w["codebook"].pk, "type_detail": w["codebook"].pk, "codebook_diff": w["codebook"].pk,
        "codebook-detail": w["codebook"].pk, "codebook-types": w["codebook"].pk, "codebook_data_js": w["codebook"].pk,
        "document_detail": w["document"].pk, "document_episode_add": w["document"].pk,
        "document_episode_split": w["document"].pk, "document_episode_delete": w["document"].pk,
        "job_status": w["job"].pk, "api-job": w["job"].pk, "report_download": w["job"].pk, "api-job-file": w["job"].pk,
        "incident_detail": w["incident"].pk, "incident_move": w["incident"].pk, "incident-detail": w["incident"].pk,
        "incident-triage": w["incident"].pk, "suggestion_reject": w["suggestion"].pk,
        "profile_token_revoke": w["token"].pk, "incident_code": w["incident"].pk,
        "member_update": w["vera_membership"], "member_remove": w["vera_membership"], "invitation_revoke": 999999,
        "trace_steps": w["document"].pk, "trace_step_text": w["document"].pk, "api-trace-steps": w["document"].pk,
    }.get(name, w["episode"].pk)  # fmt: skip
    if name == "password_reset_confirm":
        values["token"] = "set-password"
    values["pk"] = pk
    if name == "study-detail":
        values["slug"] = w["slug"]
    return {k: values[k] for k in keys}


def expected_ok(expected, response) -> bool:
    if expected == LOGIN:
        return response.status_code == 302 and "/login/" in response.get("Location", "")
    return response.status_code == expected


ROWS = sorted(MATRIX)


@pytest.mark.parametrize("name", ROWS)
def test_the_role_matrix_holds(name, world, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
    method, expected, extra = MATRIX[name]
    pattern = next(p for _, n, ns, p in url_patterns() if n == name and ns != "admin")
    url = reverse(name, kwargs=kwargs_for(name, pattern, world)) + extra.get("query", "")
    is_api = url.startswith("/api/")
    failures = []
    for persona, want in zip(PERSONAS, expected, strict=True):
        client = APIClient()
        if persona != "anon":
            if is_api and name not in ("api-schema", "api-docs"):
                client.credentials(HTTP_AUTHORIZATION=f"Token {world['tokens'][persona]}")
            else:
                client.force_login(world["users"][persona])
        if method == "GET":
            response = client.get(url)
        elif "json" in extra:
            response = client.post(url, extra["json"], format="json")
        else:
            response = client.post(url, extra.get("data", {}))
        if not expected_ok(want, response):
            failures.append(f"{persona}: wanted {want}, got {response.status_code} {response.get('Location', '')}")
    assert not failures, f"{method} {url}: " + "; ".join(failures)


ADMIN_DUMMY = {"app_label": "annotate", "object_id": "1", "content_type_id": "1", "id": "1", "url": "x"}


def test_the_admin_is_for_staff_only(world, client):
    client.force_login(world["users"]["alice"])  # owns a study, but is not staff
    checked = 0
    for route, name, ns, pattern in url_patterns():
        if ns != "admin" or name in ("login", "logout", "jsi18n") or name is None:
            continue
        keys = set(pattern.pattern.converters) | set(pattern.pattern.regex.groupindex)
        try:
            url = reverse(f"admin:{name}", kwargs={k: ADMIN_DUMMY.get(k, "1") for k in keys})
        except Exception:
            url = "/admin/" + re.sub(r"<[^>]+>", "1", route.removeprefix("admin/"))
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], (url, response.status_code)
        checked += 1
    assert checked > 50
