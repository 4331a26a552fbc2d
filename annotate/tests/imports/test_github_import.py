"""The live importer against a real HTTP server on 127.0.0.1 that speaks GitHub's REST protocol."""

import time

import pytest
from django.core.management import CommandError, call_command

from annotate.imports.github import GitHubClient, GitHubError, parse_links
from annotate.imports.services import import_github_repo
from annotate.models import Document, Episode
from annotate.tests.factories.github_server import FakeGitHub, issue

REPO = "acme-agents/taskpilot"
ISSUES = f"/repos/{REPO}/issues"


@pytest.fixture
def github(settings):
    with FakeGitHub() as server:
        settings.GITHUB_API_URL = server.url
        settings.GITHUB_TOKEN = "ghp_test_token"
        settings.FAULTLINE_GITHUB_MAX_WAIT_S = 5
        yield server


def fast_client(**kwargs):
    return GitHubClient(backoff_s=0.01, **kwargs)


def test_it_follows_link_pagination_and_skips_pull_requests(github, study):
    github.issues[REPO] = [issue(REPO, n, pr=n in (7, 180)) for n in range(1, 251)]
    result = import_github_repo(study=study, repo=REPO)
    assert (result.created, result.skipped, dict(result.skip_reasons)) == (248, 2, {"pull request": 2})
    pages = [r for r in github.requests if r["path"] == ISSUES]
    assert [r["query"].get("page", "1") for r in pages] == ["1", "2", "3"]
    assert Document.objects.filter(study=study).count() == 248
    assert Episode.objects.filter(study=study).count() == 248
    doc = Document.objects.get(study=study, external_id=f"{REPO}#12")
    assert doc.url == f"https://github.com/{REPO}/issues/12"
    assert doc.cluster == REPO and doc.labels == ",bug,"
    assert "\r" not in doc.body


def test_it_sends_the_headers_github_asks_for(github, study):
    github.issues[REPO] = [issue(REPO, 1)]
    import_github_repo(study=study, repo=REPO)
    headers = {k.lower(): v for k, v in github.requests[0]["headers"].items()}
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["user-agent"].startswith("Faultline")
    assert headers["authorization"] == "Bearer ghp_test_token"


def test_it_passes_label_since_and_state_filters(github, study):
    github.issues[REPO] = [
        issue(REPO, 1, labels=("bug", "agent")),
        issue(REPO, 2, labels=("bug",)),
        issue(REPO, 3, labels=("bug", "agent"), state="closed"),
    ]
    result = import_github_repo(study=study, repo=REPO, labels=["bug", "agent"], state="open")
    assert result.created == 1
    query = github.requests[0]["query"]
    assert (query["labels"], query["state"], query["per_page"]) == ("bug,agent", "open", "100")
    import_github_repo(study=study, repo=REPO, since="2025-02-03T00:00:00Z")
    assert github.requests[-1]["query"]["since"] == "2025-02-03T00:00:00Z"


def test_it_retries_a_500_then_succeeds(github, study):
    github.issues[REPO] = [issue(REPO, n) for n in range(1, 4)]
    github.fault(ISSUES, 500)
    github.fault(ISSUES, 502)
    result = import_github_repo(study=study, repo=REPO, client=fast_client())
    assert result.created == 3
    assert len([r for r in github.requests if r["path"] == ISSUES]) == 3


def test_it_waits_out_a_short_rate_limit(github, study):
    github.issues[REPO] = [issue(REPO, n) for n in range(1, 4)]
    reset = int(time.time()) + 1
    github.fault(ISSUES, 403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
                 {"message": "API rate limit exceeded"})  # fmt: skip
    started = time.monotonic()
    result = import_github_repo(study=study, repo=REPO)
    # It waited until the reset (plus a second of margin) and then asked again.
    assert time.monotonic() - started >= 1.0
    assert len([r for r in github.requests if r["path"] == ISSUES]) == 2
    assert result.created == 3 and not result.stopped


def test_it_honours_retry_after_on_429(github, study):
    github.issues[REPO] = [issue(REPO, 1)]
    github.fault(ISSUES, 429, {"Retry-After": "2"})
    waits = []
    client = GitHubClient(sleep=waits.append)
    assert import_github_repo(study=study, repo=REPO, client=client).created == 1
    assert waits == [2.0]


def test_a_long_rate_limit_stops_and_keeps_what_was_imported(github, study):
    github.issues[REPO] = [issue(REPO, n) for n in range(1, 151)]
    # Page 1 succeeds; page 2 is refused until an hour from now.
    serve_page = github.paginate

    def paginate(req, path, query, items):
        if query.get("page") == "2":
            headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)}
            return github.send(req, 403, {"message": "API rate limit exceeded"}, headers)
        return serve_page(req, path, query, items)

    github.paginate = paginate
    with pytest.raises(CommandError, match=r"stopped early, keeping the 100 issues.*rate limit.*resets at"):
        call_command("import_github", "--study", study.slug, "--repo", REPO)
    assert Document.objects.filter(study=study).count() == 100


def test_with_comments_appends_marked_comments(github, study):
    github.issues[REPO] = [issue(REPO, 1, comments=2), issue(REPO, 2)]
    github.comments[(REPO, 1)] = [
        {"user": {"login": "maintainer"}, "created_at": "2025-01-05T00:00:00Z", "body": "Fixed in 1.2."},
        {"user": {"login": "reporter"}, "created_at": "2025-01-06T00:00:00Z", "body": "Confirmed <b>fixed</b>."},
    ]
    call_command("import_github", "--study", study.slug, "--repo", REPO, "--with-comments")
    body = Document.objects.get(study=study, external_id=f"{REPO}#1").body
    assert body.index("### Comments (imported)") < body.index("**Comment by @maintainer** (2025-01-05)")
    assert "Confirmed <b>fixed</b>." in body
    assert "Comments (imported)" not in Document.objects.get(study=study, external_id=f"{REPO}#2").body
    # Issue 2 has no comments, so only issue 1's comments were fetched.
    assert [r["path"] for r in github.requests if r["path"].endswith("/comments")] == [f"{ISSUES}/1/comments"]


def test_a_missing_repository_is_a_clear_error(github, study):
    with pytest.raises(CommandError, match=r"404.*no such repository"):
        call_command("import_github", "--study", study.slug, "--repo", "nobody/nothing")
    assert not Document.objects.exists()


def test_a_persistent_outage_gives_up(github, study):
    github.issues[REPO] = [issue(REPO, 1)]
    for _ in range(5):
        github.fault(ISSUES, 503)
    with pytest.raises(GitHubError, match="503"):
        import_github_repo(study=study, repo=REPO, client=fast_client())


def test_a_reimport_from_the_api_creates_nothing(github, study):
    github.issues[REPO] = [issue(REPO, n) for n in range(1, 31)]
    import_github_repo(study=study, repo=REPO)
    again = import_github_repo(study=study, repo=REPO)
    assert (again.created, again.unchanged) == (0, 30)


def test_it_parses_link_headers():
    header = '<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=5>; rel="last"'
    assert parse_links(header) == {"next": "https://api.github.com/x?page=2", "last": "https://api.github.com/x?page=5"}
