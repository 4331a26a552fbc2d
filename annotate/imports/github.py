"""The only module that talks to GitHub: the REST API client used by the live importer.

It follows `Link: rel="next"` pagination, retries 5xx answers and network errors
with backoff, and honours rate limits: a 403/429 carrying `Retry-After` or
`X-RateLimit-Remaining: 0` is waited out when the wait is at most
FAULTLINE_GITHUB_MAX_WAIT_S, and otherwise raises `RateLimited` with a clear
message, so the caller can keep what it already imported.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from django.conf import settings

USER_AGENT = "Faultline-importer/1.0 (+https://github.com/faultline)"
API_VERSION = "2022-11-28"
PER_PAGE = 100
_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?([^";]+)"?')
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class GitHubError(Exception):
    """GitHub answered with an error we cannot recover from (bad repo, bad token, outage)."""


class RateLimited(GitHubError):
    """The rate limit resets later than we are willing to wait."""

    def __init__(self, message: str, *, wait_s: float):
        super().__init__(message)
        self.wait_s = wait_s


def parse_links(header: str | None) -> dict[str, str]:
    """`Link: <url>; rel="next", <url>; rel="last"` as {"next": url, "last": url}."""
    return {rel: url for url, rel in _LINK.findall(header or "")}


@dataclass
class Page:
    items: list[dict[str, Any]]
    next_url: str | None
    last_page: int | None  # from rel="last", when GitHub gives it


class GitHubClient:
    """A small, synchronous GitHub REST client (httpx)."""

    def __init__(
        self,
        *,
        token: str | None = None,
        api_url: str | None = None,
        max_wait_s: float | None = None,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.api_url = (api_url or settings.GITHUB_API_URL).rstrip("/")
        self.max_wait_s = settings.FAULTLINE_GITHUB_MAX_WAIT_S if max_wait_s is None else max_wait_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.sleep = sleep
        token = settings.GITHUB_TOKEN if token is None else token
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(headers=headers, timeout=timeout_s, follow_redirects=True)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rate_limit_wait(self, response: httpx.Response) -> float | None:
        """Seconds to wait if this response is a rate-limit refusal, else None."""
        if response.status_code not in (403, 429):
            return None
        retry_after = response.headers.get("Retry-After")
        if retry_after and retry_after.strip().isdigit():
            return float(retry_after)
        if response.headers.get("X-RateLimit-Remaining") == "0":
            reset = response.headers.get("X-RateLimit-Reset", "")
            if reset.strip().isdigit():
                return max(0.0, int(reset) - time.time()) + 1.0
            return 60.0
        if response.status_code == 429 or "rate limit" in response.text[:500].lower():
            # A secondary rate limit without headers: GitHub asks for at least a minute.
            return 60.0
        return None

    def get(self, url: str, params: dict[str, Any] | None = None) -> httpx.Response:
        """GET with retries on 5xx/network errors and rate-limit waits. Raises GitHubError."""
        if not url.startswith(("http://", "https://")):
            url = f"{self.api_url}/{url.lstrip('/')}"
        failures = 0
        while True:
            try:
                response = self.http.get(url, params=params)
            except httpx.TransportError as exc:
                failures += 1
                if failures > self.max_retries:
                    raise GitHubError(f"cannot reach GitHub at {self.api_url}: {exc}") from exc
                self.sleep(self.backoff_s * 2 ** (failures - 1))
                continue
            wait = self._rate_limit_wait(response)
            if wait is not None:
                if wait > self.max_wait_s:
                    resets = datetime.fromtimestamp(time.time() + wait, tz=UTC).strftime("%H:%M UTC")
                    raise RateLimited(
                        f"GitHub rate limit reached; it resets at {resets}, in {wait / 60:.0f} min, longer than "
                        f"the {self.max_wait_s:.0f} s we wait (FAULTLINE_GITHUB_MAX_WAIT_S). "
                        "Run the import again later (it is idempotent), or set GITHUB_TOKEN for a higher limit.",
                        wait_s=wait,
                    )
                failures += 1
                if failures > self.max_retries + 2:
                    raise GitHubError("GitHub kept refusing with rate limits after waiting; try again later")
                self.sleep(wait)
                continue
            if response.status_code >= 500:
                failures += 1
                if failures > self.max_retries:
                    raise GitHubError(f"GitHub answered {response.status_code} {url} {failures} times; try later")
                self.sleep(self.backoff_s * 2 ** (failures - 1))
                continue
            if response.status_code >= 400:
                raise GitHubError(self._error_message(response))
            return response

    @staticmethod
    def _error_message(response: httpx.Response) -> str:
        try:
            message = response.json().get("message", "")
        except ValueError:
            message = response.text[:200]
        hint = {
            401: " (check GITHUB_TOKEN)",
            403: " (the token lacks access)",
            404: " (no such repository, or it is private)",
        }.get(response.status_code, "")
        return f"GitHub answered {response.status_code} for {response.request.url}: {message}{hint}"

    def pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[Page]:
        """Every page of a list endpoint, following rel="next"."""
        url: str | None = path
        while url:
            response = self.get(url, params=params)
            params = None  # the next link carries the query string
            data = response.json()
            if not isinstance(data, list):
                raise GitHubError(f"expected a list from {response.request.url}, got {type(data).__name__}")
            links = parse_links(response.headers.get("Link"))
            last = re.search(r"[?&]page=(\d+)", links.get("last", ""))
            yield Page(items=data, next_url=links.get("next"), last_page=int(last.group(1)) if last else None)
            url = links.get("next")

    def issue_pages(
        self,
        repo: str,
        *,
        labels: list[str] | tuple[str, ...] = (),
        since: str | None = None,
        state: str = "all",
    ) -> Iterator[Page]:
        """Pages of `GET /repos/{repo}/issues` (which includes pull requests, marked `pull_request`).

        Several labels mean issues carrying all of them, as on GitHub.
        """
        if not _REPO.match(repo):
            raise GitHubError(f"'{repo}' is not a repository name of the form OWNER/NAME")
        if state not in ("all", "open", "closed"):
            raise GitHubError(f"state must be all, open or closed, not '{state}'")
        params: dict[str, Any] = {"state": state, "per_page": PER_PAGE, "sort": "created", "direction": "asc"}
        if labels:
            params["labels"] = ",".join(labels)
        if since:
            params["since"] = since
        yield from self.pages(f"repos/{repo}/issues", params)

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        """One issue, `GET /repos/{repo}/issues/{number}` (a pull request answers here too, marked `pull_request`)."""
        if not _REPO.match(repo):
            raise GitHubError(f"'{repo}' is not a repository name of the form OWNER/NAME")
        data = self.get(f"repos/{repo}/issues/{int(number)}").json()
        if not isinstance(data, dict):
            raise GitHubError(f"expected an issue object for {repo}#{number}, got {type(data).__name__}")
        return data

    def comments(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """All comments of an issue, oldest first."""
        url = item.get("comments_url")
        if not isinstance(url, str):
            repo = item.get("repository_url", "").split("/repos/", 1)[-1]
            url = f"repos/{repo}/issues/{item['number']}/comments"
        out: list[dict[str, Any]] = []
        for page in self.pages(url, {"per_page": PER_PAGE}):
            out.extend(page.items)
        return out


def comments_markdown(comments: list[dict[str, Any]]) -> str:
    """Comments as Markdown to append to an issue body, each marked with its author and date."""
    parts = []
    for comment in comments:
        user = (comment.get("user") or {}).get("login", "unknown")
        when = str(comment.get("created_at") or "")[:10]
        parts.append(f"**Comment by @{user}** ({when}):\n\n{comment.get('body') or ''}".rstrip())
    if not parts:
        return ""
    return "\n\n---\n\n### Comments (imported)\n\n" + "\n\n---\n\n".join(parts)
