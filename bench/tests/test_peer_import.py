"""The import bench's peer client (bench/peer_import.py) against a local server speaking Label Studio's import
API: a project is made, the file uploaded as multipart, and the run ends only when every task exists."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.peer_import import label_studio_import


class FakeLabelStudio(BaseHTTPRequestHandler):
    seen: list = []
    tasks = 0
    refuse = False
    polls_until_done = 3

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        cls.seen.append((self.path, self.headers["Authorization"], self.headers["Content-Type"], body))
        if self.path == "/api/projects":
            return self._answer(201, {"id": 7, "title": json.loads(body)["title"]})
        if cls.refuse:
            return self._answer(400, {"detail": "no tasks"})
        cls.tasks = body.count(b'"number"')  # as an asynchronous import, tasks appear over the next polls
        return self._answer(201, {"task_count": cls.tasks})

    def do_GET(self):
        cls = type(self)
        cls.seen.append((self.path, self.headers["Authorization"], None, None))
        cls.polls_until_done -= 1
        return self._answer(200, {"id": 7, "task_number": cls.tasks if cls.polls_until_done <= 0 else 0})


@pytest.fixture
def server():
    FakeLabelStudio.seen, FakeLabelStudio.tasks, FakeLabelStudio.refuse = [], 0, False
    FakeLabelStudio.polls_until_done = 3
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeLabelStudio)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def issues(tmp_path, n: int):
    path = tmp_path / "issues.json"
    path.write_text(json.dumps([{"number": i, "title": f"t{i}", "body": "b"} for i in range(n)]))
    return path


def test_it_makes_a_project_uploads_the_file_and_waits_for_every_task(server, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_SETTLE_S", "0")
    got = label_studio_import(server, "tok", issues(tmp_path, 25), 25)
    paths = [s[0] for s in FakeLabelStudio.seen]
    assert paths[:2] == ["/api/projects", "/api/projects/7/import"]
    assert paths[2:] == ["/api/projects/7/"] * 3  # polled until the tasks were all there
    assert {s[1] for s in FakeLabelStudio.seen} == {"Token tok"}
    upload = FakeLabelStudio.seen[1]
    assert upload[2].startswith("multipart/form-data") and b'filename="issues.json"' in upload[3]
    assert got["n"] == 25 and got["done_s"] >= got["answered_s"] > 0
    assert got["per_s"] == pytest.approx(25 / got["done_s"], rel=0.01) and got["cpu_ms_per_issue"] is None


def test_a_refused_import_stops_the_bench_with_the_peers_answer(server, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_SETTLE_S", "0")
    FakeLabelStudio.refuse = True
    with pytest.raises(SystemExit, match="400"):
        label_studio_import(server, "tok", issues(tmp_path, 3), 3)
