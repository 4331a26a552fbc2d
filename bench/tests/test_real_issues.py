"""The real-issue set's tooling: the split rule, fetch.py against a local GitHub REST server, build_export.py."""

from __future__ import annotations

import csv
import json

import pytest

from annotate.imports.github import GitHubClient
from annotate.tests.factories.github_server import FakeGitHub, issue
from bench.real_issues import build_export, dataset, fetch

# Fictional repositories and texts: no real issue is stored in the repository.
REPOS = ("acme/agentkit", "acme/shopbot", "zeta/planner", "zeta/coder-cli")


def _write_csv(path, rows):
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=dataset.COLUMNS)
        w.writeheader()
        for url, ftype in rows:
            repo, _ = dataset.parse_url(url)
            w.writerow(
                {"url": url, "repository": repo, "split": dataset.split_of(repo), "language": "en",
                 "repo_kind": "framework", "source": "framework", "failure_type": ftype, "stage": "iterative_execution",
                 "capability": "actuation", "adjudicated": "true" if ftype == "CTL-01" else "false"}
            )  # fmt: skip


def test_it_splits_by_repository_with_the_documented_hash():
    # int(sha256("acme/agentkit").hexdigest(), 16) % 100, computed independently of split_of.
    import hashlib

    for repo in REPOS:
        bucket = int(hashlib.sha256(repo.encode()).hexdigest(), 16) % 100
        assert dataset.split_of(repo) == ("test" if bucket < 40 else "dev")
        assert dataset.split_of(repo.upper()) == dataset.split_of(repo)


def test_it_refuses_a_row_whose_split_breaks_the_rule(tmp_path):
    path = tmp_path / "issues.csv"
    _write_csv(path, [("https://github.com/acme/agentkit/issues/1", "CTL-01")])
    text = path.read_text()
    wrong = "dev" if dataset.split_of("acme/agentkit") == "test" else "test"
    path.write_text(text.replace(f",{dataset.split_of('acme/agentkit')},", f",{wrong},"))
    with pytest.raises(ValueError, match="repository hash rule"):
        dataset.read_csv(path)


def test_it_fetches_missing_texts_through_the_github_client_and_skips_cached_ones(tmp_path):
    path = tmp_path / "issues.csv"
    urls = [f"https://github.com/acme/agentkit/issues/{n}" for n in (3, 4)] + [
        "https://github.com/zeta/planner/issues/9"  # not on the server: a 404, counted as failed
    ]
    _write_csv(path, [(u, "CTL-01") for u in urls])
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "acme__agentkit__4.json").write_text(json.dumps({"title": "kept", "body": "already here"}))
    with FakeGitHub() as gh:
        gh.issues["acme/agentkit"] = [issue("acme/agentkit", 3, labels=("bug", "agent")), issue("acme/agentkit", 4)]
        with GitHubClient(api_url=gh.url, token="tok-123", backoff_s=0, sleep=lambda s: None) as client:
            counts = fetch.fetch_all(dataset.read_csv(path), cache, client)
        paths = [r["path"] for r in gh.requests]
        auth = {r["headers"].get("Authorization") for r in gh.requests}
    assert counts == {"fetched": 1, "skipped": 1, "failed": 1}
    assert paths == ["/repos/acme/agentkit/issues/3", "/repos/zeta/planner/issues/9"]
    assert auth == {"Bearer tok-123"}
    got = json.loads((cache / "acme__agentkit__3.json").read_text())
    assert got["title"] == "Agent fails on step 3" and "looped on tool call 3" in got["body"]
    assert got["labels"] == ["bug", "agent"] and got["repository"] == "acme/agentkit" and got["number"] == 3
    assert json.loads((cache / "acme__agentkit__4.json").read_text())["title"] == "kept"
    assert not (cache / "zeta__planner__9.json").exists()


def test_it_retries_a_server_error_while_fetching(tmp_path, settings):
    path = tmp_path / "issues.csv"
    _write_csv(path, [("https://github.com/acme/agentkit/issues/5", "CTL-01")])
    with FakeGitHub() as gh:
        gh.issues["acme/agentkit"] = [issue("acme/agentkit", 5)]
        gh.fault("/repos/acme/agentkit/issues/5", 502)
        settings.GITHUB_API_URL = gh.url
        settings.GITHUB_TOKEN = ""
        counts = fetch.main(["--csv", str(path), "--cache", str(tmp_path / "c")])
    assert counts["fetched"] == 1 and (tmp_path / "c" / "acme__agentkit__5.json").is_file()


def test_it_builds_the_export_the_bench_reads_for_one_split(tmp_path):
    from bench.suggest_quality_bench import load_items

    urls = [f"https://github.com/{repo}/issues/{n}" for repo in REPOS for n in (1, 2)]
    path = tmp_path / "issues.csv"
    _write_csv(path, [(u, "CTL-01" if n % 2 else "TUS-06") for n, u in enumerate(urls)])
    cache = tmp_path / "cache" / "texts"
    cache.mkdir(parents=True)
    for u in urls[:-1]:  # the last one is not fetched
        (cache / dataset.cache_name(u)).write_text(json.dumps({"title": f"T {u}", "body": f"The agent repeated {u}."}))
    rows = dataset.read_csv(path)
    for split in ("test", "dev"):
        out, missing = build_export.build(rows, tmp_path / "cache", split)
        want = [u for u in urls if dataset.split_of(dataset.parse_url(u)[0]) == split]
        assert [r["url"] for r in out] + missing == want
        assert missing == ([urls[-1]] if urls[-1] in want else [])
    out, _ = build_export.build(rows, tmp_path / "cache", "all")
    assert len(out) == len(urls) - 1
    export = tmp_path / "all.jsonl"
    export.write_text("".join(json.dumps(r) + "\n" for r in out))
    items = load_items(export)
    assert len(items) == len(out)
    first = items[0]
    assert (first.title, first.cluster, first.kind) == (f"T {urls[0]}", REPOS[0], "github_issue")
    assert first.text == f"The agent repeated {urls[0]}."
    assert (first.failure_type, first.source, first.stage, first.capability) == (
        "TUS-06", "framework", "iterative_execution", "actuation",
    )  # fmt: skip
    assert [r["label_status"] for r in out[:2]] == ["agreed", "adjudicated"]
