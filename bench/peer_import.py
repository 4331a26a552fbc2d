"""The peer of the import bench: Label Studio's published import endpoint, timed like Faultline's import.

`POST /api/projects` makes a project with a one-field text config; `POST /api/projects/{id}/import` with the
same file of issues (a JSON array: each issue becomes a task whose data is the issue); then the project's
`task_number` is polled until every task exists. Like Faultline's, each run starts once the machine is
quiet (import_http.settle), and the time runs from the start of the upload, as
bench/import_http.py times Faultline's. With the peer's process id, the CPU of its process tree (its web
server and any worker it forks) is read from /proc as for Faultline's processes. Nothing of the peer is in
this repository: point LABEL_STUDIO_URL and LABEL_STUDIO_TOKEN (an access token with legacy token
authentication enabled for its organization) at a running one.
"""

from __future__ import annotations

import time
from pathlib import Path

LABEL_CONFIG = (
    '<View><Text name="text" value="$body"/><Choices name="type" toName="text">'
    '<Choice value="tool"/><Choice value="model"/></Choices></View>'
)


def label_studio_import(url: str, token: str, path: Path, n: int, *, pid: int | None = None) -> dict:
    """Import `path` (n issues) into a new Label Studio project; the rate to every task created, and CPU."""
    import httpx

    from bench.import_http import proc_tree_cpu_s, settle, wait_for

    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=1800) as client:
        title = f"import bench {time.time():.0f}"
        made = client.post("/api/projects", json={"title": title, "label_config": LABEL_CONFIG})
        made.raise_for_status()
        project = made.json()["id"]
        idle = settle()
        cpu0, t0 = proc_tree_cpu_s(pid) if pid else 0.0, time.perf_counter()
        with path.open("rb") as fh:
            answer = client.post(f"/api/projects/{project}/import", files={"file": (path.name, fh)})
        answered = time.perf_counter()
        if answer.status_code not in (200, 201):
            raise SystemExit(f"the peer refused the import: {answer.status_code} {answer.text[:300]}")
        done = wait_for(lambda: client.get(f"/api/projects/{project}/").json().get("task_number") == n, timeout=1800)
        cpu = proc_tree_cpu_s(pid) - cpu0 if pid else None
    return {
        "peer": "label-studio",
        "n": n,
        "idle_before": round(idle, 2),
        "answered_s": round(answered - t0, 3),
        "done_s": round(done - t0, 3),
        "per_s": round(n / (done - t0), 1),
        "cpu_ms_per_issue": None if cpu is None else round(cpu * 1000 / n, 4),
    }
