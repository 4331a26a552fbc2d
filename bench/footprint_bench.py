#!/usr/bin/env python
"""Memory of the production set-up: RSS and PSS of every process `make serve` runs, idle and under load.

    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://.../N python bench/footprint_bench.py [--n 10000]

Starts deploy/supervise.py (gunicorn as deploy/gunicorn.conf.py configures it, a Celery worker, Celery
beat) with the production settings, on a fresh database next to the one named (dropped afterwards),
and reads /proc/<pid>/smaps_rollup of every process in its tree: RSS counts the pages a process shares
with others (a forked worker's copy-on-write pages) once per process, PSS divides each shared page
among the processes that map it, so the PSS column adds up to what the set-up really holds.
1. idle: 20 s after every process is up;
2. load: an import of N issues with real-sized bodies over the API (then the search index job), while a
   client pages through the documents list, searches and opens the analysis page; the peak of each
   process, sampled every 100 ms;
3. idle again, 10 s after the load.
Target: idle RSS of the whole set-up <= 600 MB on a 2-core machine. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.export_bench import free_port, wait_up  # noqa: E402
from bench.import_http import _children  # noqa: E402

TARGET_IDLE_RSS_MB = 600


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of one process in MB, from smaps_rollup."""
    rss = pss = 0.0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return rss, pss


def role(pid: int) -> str:
    """What a process of the set-up is, from its command line."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return "gone"
    if "supervise.py" in cmd:
        return "supervisor"
    if "gunicorn" in cmd:
        return "web master" if not _is_child_of(pid, "gunicorn") else "web worker"
    if " beat" in cmd:
        return "beat"
    if "celery" in cmd:
        return "worker master" if not _is_child_of(pid, "celery") else "worker pool"
    return cmd[:40]


def _is_child_of(pid: int, name: str) -> bool:
    try:
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return name in Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace")
    except (FileNotFoundError, ValueError):
        return False


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def snapshot(root: int) -> dict[int, dict]:
    return {p: {"role": role(p), **dict(zip(("rss", "pss"), memory_mb(p), strict=True))} for p in tree(root)}


def summarise(snap: dict[int, dict]) -> dict:
    roles: dict[str, dict] = {}
    for proc in snap.values():
        r = roles.setdefault(proc["role"], {"n": 0, "rss": 0.0, "pss": 0.0})
        r["n"] += 1
        r["rss"] += proc["rss"]
        r["pss"] += proc["pss"]
    total = {"rss": sum(p["rss"] for p in snap.values()), "pss": sum(p["pss"] for p in snap.values())}
    return {"roles": {k: {"n": v["n"], "rss_mb": round(v["rss"], 1), "pss_mb": round(v["pss"], 1)}
                      for k, v in sorted(roles.items())},
            "rss_mb": round(total["rss"], 1), "pss_mb": round(total["pss"], 1)}  # fmt: skip


class Peaks:
    """The highest RSS and PSS each role reached (summed over its processes), sampled every 100 ms."""

    def __init__(self, root: int) -> None:
        self.root, self.peak, self.running = root, {"roles": {}, "rss_mb": 0.0, "pss_mb": 0.0}, True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            now = summarise(snapshot(self.root))
            for key in ("rss_mb", "pss_mb"):
                self.peak[key] = max(self.peak[key], now[key])
            for name, r in now["roles"].items():
                p = self.peak["roles"].setdefault(name, {"n": 0, "rss_mb": 0.0, "pss_mb": 0.0})
                for key in ("n", "rss_mb", "pss_mb"):
                    p[key] = max(p[key], r[key])
            time.sleep(0.1)

    def stop(self) -> dict:
        self.running = False
        self.thread.join()
        return self.peak


def print_table(label: str, s: dict) -> None:
    print(f"--- {label}: RSS {s['rss_mb']:.0f} MB, PSS {s['pss_mb']:.0f} MB")
    for name, r in s["roles"].items():
        print(f"  {name:<14} x{r['n']:<2} RSS {r['rss_mb']:7.1f} MB  PSS {r['pss_mb']:7.1f} MB")


def load(port: int, slug: str, token: str, path: Path, n: int) -> dict:
    """The import over the API, and meanwhile a reader of the documents list, search and analysis pages."""
    import httpx

    from bench.import_http import upload_import

    stop = threading.Event()

    def reader() -> None:
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=120) as client:
            while not stop.is_set():
                for url in (f"/api/v1/studies/{slug}/documents/?q=agent", f"/api/v1/studies/{slug}/documents/",
                            f"/api/v1/studies/{slug}/matrix/", f"/api/v1/studies/{slug}/coverage/"):  # fmt: skip
                    client.get(url)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        got = upload_import(port=port, slug=slug, path=path, n=n, token=token, web_pid=os.getpid(), worker_pid=None,
                            pg=None)  # fmt: skip
        # Only the times: this bench does not follow the CPU of the set-up's processes (import_bench does).
        return {k: v for k, v in got.items() if "cpu" not in k}
    finally:
        stop.set()
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="issues imported under load")
    parser.add_argument("--idle-s", type=float, default=20.0)
    args = parser.parse_args()
    url, broker = os.environ.get("DATABASE_URL", ""), os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("postgres") or not broker.startswith("redis"):
        raise SystemExit("footprint_bench needs DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://...")
    from bench.import_bench import write_issues
    from bench.scale_bench import fresh_database, production_env, stop

    url, drop = fresh_database(url)
    queue = f"footprint-{uuid.uuid4().hex[:8]}"
    os.environ.update(DATABASE_URL=url, FAULTLINE_CELERY_QUEUE=queue, FAULTLINE_MAX_UPLOAD_MB="2000",
                      FAULTLINE_THROTTLE_USER="1000000/min", FAULTLINE_DEV="1",
                      DJANGO_SETTINGS_MODULE="config.settings")  # fmt: skip
    work = Path(f"/tmp/footprint-{uuid.uuid4().hex[:8]}")
    work.mkdir()
    supervisor = None
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from annotate.studies.services import study_create
        from annotate.studies.tokens import token_create
        from taxonomy.services import codebook_load, codebook_read_file

        call_command("migrate", verbosity=0)
        owner = get_user_model().objects.create_user(username="owner", password=secrets.token_hex(8))
        codebook = codebook_load(data=codebook_read_file(ROOT / "fixtures" / "codebook-v1.json"), publish=True)
        study = study_create(slug="footprint", name="Footprint", codebook=codebook.codebook, owner=owner)
        study.suggest_on_import = False
        study.save(update_fields=["suggest_on_import"])
        _, token = token_create(user=owner, name="footprint bench")
        path = work / "issues.json"
        write_issues(path, args.n)
        port = free_port()
        env = {**production_env(dict(os.environ)), "FAULTLINE_BIND": f"127.0.0.1:{port}",
               "FAULTLINE_ACCESS_LOG": "/dev/null", "CELERY_LOG_LEVEL": "WARNING",
               "CELERY_BEAT_SCHEDULE": str(work / "beat")}  # fmt: skip
        supervisor = subprocess.Popen([sys.executable, "deploy/supervise.py"], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        wait_up(f"http://127.0.0.1:{port}", supervisor)
        time.sleep(args.idle_s)
        idle = summarise(snapshot(supervisor.pid))
        print_table("idle", idle)
        peaks = Peaks(supervisor.pid)
        figures = load(port, study.slug, token, path, args.n)
        peak = peaks.stop()
        print_table(f"peak under load (import of {args.n:,} issues + pages)", peak)
        time.sleep(10)
        after = summarise(snapshot(supervisor.pid))
        print_table("idle after the load", after)
    finally:
        if supervisor is not None:
            stop(supervisor)
        drop()
    print(json.dumps({"bench": "footprint", "cores": len(os.sched_getaffinity(0)), "idle": idle, "peak": peak,
                      "after": after, "idle_rss_mb": idle["rss_mb"], "idle_pss_mb": idle["pss_mb"],
                      "peak_rss_mb": peak["rss_mb"], "peak_pss_mb": peak["pss_mb"], "import": figures,
                      "idle_rss_target_met": idle["rss_mb"] <= TARGET_IDLE_RSS_MB}))  # fmt: skip


if __name__ == "__main__":
    main()
