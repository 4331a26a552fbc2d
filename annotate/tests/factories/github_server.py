"""A small GitHub REST API on 127.0.0.1 for the live-importer tests.

It speaks the real protocol over HTTP: paginated list endpoints with `Link`
headers (rel="next"/"last"), `per_page`/`page`/`state`/`labels`/`since` query
parameters, single issues, comment lists, 404 bodies, and scripted faults (a 500, a rate-limit
refusal with X-RateLimit-Reset or Retry-After) queued per path.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def issue(repo: str, number: int, *, pr: bool = False, labels=("bug",), comments: int = 0, state="open") -> dict:
    api = f"http://api.invalid/repos/{repo}"
    item = {
        "url": f"{api}/issues/{number}",
        "repository_url": api,
        "comments_url": f"{api}/issues/{number}/comments",
        "html_url": f"https://github.com/{repo}/{'pull' if pr else 'issues'}/{number}",
        "id": 1000 + number,
        "number": number,
        "title": f"Agent fails on step {number}",
        "user": {"login": f"user{number % 7}", "id": number, "type": "User"},
        "labels": [{"id": i, "name": name, "color": "ededed"} for i, name in enumerate(labels)],
        "state": state,
        "comments": comments,
        "created_at": f"2025-01-{1 + number % 28:02d}T10:00:00Z",
        "updated_at": f"2025-02-{1 + number % 28:02d}T10:00:00Z",
        "closed_at": None,
        "body": f"The agent looped on tool call {number}.\r\n\r\n```\ntrace {number}\n```\n",
    }
    if pr:
        item["pull_request"] = {"url": f"{api}/pulls/{number}", "html_url": item["html_url"], "merged_at": None}
    return item


class FakeGitHub:
    def __init__(self):
        self.issues: dict[str, list[dict]] = {}
        self.comments: dict[tuple[str, int], list[dict]] = {}
        self.faults: dict[str, list[tuple[int, dict, dict]]] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeGitHub:
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def fault(self, path: str, status: int, headers: dict | None = None, body: dict | None = None) -> None:
        """Answer the next GET of `path` with this status instead of the real answer."""
        self.faults.setdefault(path, []).append((status, headers or {}, body or {"message": "fault"}))

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(req.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            self.requests.append({"path": parts.path, "query": query, "headers": dict(req.headers)})
            queued = self.faults.get(parts.path) or []
            fault = queued.pop(0) if queued else None
        if fault:
            return self.send(req, fault[0], fault[2], fault[1])
        segments = parts.path.strip("/").split("/")
        if len(segments) == 4 and segments[0] == "repos" and segments[3] == "issues":
            repo = f"{segments[1]}/{segments[2]}"
            if repo not in self.issues:
                return self.send(req, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com"})
            items = [i for i in self.issues[repo] if query.get("state", "open") in ("all", i["state"])]
            for name in filter(None, query.get("labels", "").split(",")):
                items = [i for i in items if name in {lbl["name"] for lbl in i["labels"]}]
            if "since" in query:
                items = [i for i in items if i["updated_at"] >= query["since"]]
            return self.paginate(req, parts.path, query, items)
        if len(segments) == 5 and segments[0] == "repos" and segments[3] == "issues" and segments[4].isdigit():
            found = [i for i in self.issues.get(f"{segments[1]}/{segments[2]}", []) if i["number"] == int(segments[4])]
            if not found:
                return self.send(req, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com"})
            return self.send(req, 200, found[0], {"X-RateLimit-Remaining": "4999"})
        if len(segments) == 6 and segments[3] == "issues" and segments[5] == "comments":
            key = (f"{segments[1]}/{segments[2]}", int(segments[4]))
            return self.paginate(req, parts.path, query, self.comments.get(key, []))
        self.send(req, 404, {"message": "Not Found"})

    def paginate(self, req, path: str, query: dict, items: list) -> None:
        per_page = int(query.get("per_page", 30))
        page = int(query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        other = "&".join(f"{k}={v}" for k, v in query.items() if k != "page")
        if page < last:
            links.append(f'<{self.url}{path}?{other}&page={page + 1}>; rel="next"')
            links.append(f'<{self.url}{path}?{other}&page={last}>; rel="last"')
        headers = {"Link": ", ".join(links)} if links else {}
        headers["X-RateLimit-Remaining"] = "4999"
        self.send(req, 200, chunk, headers)

    def send(self, req, status: int, body, headers: dict | None = None) -> None:
        # Items are built before the port is known; their API links point here.
        data = json.dumps(body).replace("http://api.invalid", self.url).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json; charset=utf-8")
        req.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            req.send_header(key, value)
        req.end_headers()
        req.wfile.write(data)
