"""Run gunicorn, a Celery worker and Celery beat, supervising each process on its own (`make serve`).

A process that exits, for whatever reason, is restarted after a pause: 1 s,
doubling up to 30 s while it keeps dying within a minute of its start. The
other processes keep running, so a worker that dies (an out-of-memory kill, a
crash) never takes the web server down, and the web server keeps answering
while the worker restarts. Each process runs in a process group of its own;
when one dies, whatever it left behind in its group (a dead worker's pool
processes) is killed before the new one starts.

SIGTERM or SIGINT stops everything: each process gets SIGTERM and
FAULTLINE_STOP_TIMEOUT_S seconds (default 60) to finish its current work
(tasks are acknowledged late, so unfinished work is redelivered anyway), then
SIGKILL. Configured by the environment, like serve.sh.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

MIN_DELAY_S, MAX_DELAY_S, STABLE_S = 1.0, 30.0, 60.0


def log(message: str) -> None:
    print(f"[supervise {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Program:
    name: str
    argv: list[str]
    proc: subprocess.Popen | None = None
    started: float = 0.0
    delay: float = MIN_DELAY_S / 2  # doubled on the first quick exit
    restart_at: float | None = field(default=0.0)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, start_new_session=True)  # noqa: S603 - our own fixed commands
        self.started, self.restart_at = time.monotonic(), None
        log(f"{self.name} started (pid {self.proc.pid})")

    def reap(self) -> None:
        """Notice an exit, clean up its process group and schedule the restart."""
        if self.proc is None or self.proc.poll() is None:
            return
        code, pid = self.proc.returncode, self.proc.pid
        self.proc = None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # leftovers of the dead process (a worker's pool children)
        ran = time.monotonic() - self.started
        self.delay = MIN_DELAY_S if ran >= STABLE_S else min(MAX_DELAY_S, self.delay * 2)
        self.restart_at = time.monotonic() + self.delay
        log(f"{self.name} (pid {pid}) exited with {code} after {ran:.0f} s; restarting in {self.delay:.0f} s")


def worker_concurrency() -> int:
    """As config.settings.CELERY_WORKER_CONCURRENCY: CELERY_CONCURRENCY, else one pool process per two cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return int(os.environ.get("CELERY_CONCURRENCY") or max(1, cores // 2))


def programs() -> list[Program]:
    py = sys.executable
    level = os.environ.get("CELERY_LOG_LEVEL", "INFO")
    schedule = os.environ.get("CELERY_BEAT_SCHEDULE", "/tmp/faultline-celerybeat")  # noqa: S108 - a local default
    # The pool's size and recycling come from the settings (CELERY_CONCURRENCY, FAULTLINE_WORKER_MAX_MEMORY_MB);
    # one task at a time runs in the worker process itself (the solo pool), saving a forked pool process.
    pool = ["--pool", "solo"] if worker_concurrency() == 1 and not os.environ.get("FAULTLINE_WORKER_POOL") else []
    return [
        Program("web", [py, "-m", "gunicorn", "config.wsgi", "-c", "deploy/gunicorn.conf.py"]),
        Program("worker", [py, "-m", "celery", "-A", "config", "worker", "-l", level, *pool]),
        Program("beat", [py, "-m", "celery", "-A", "config", "beat", "-l", level, "--schedule", schedule]),
    ]


def stop(running: list[Program]) -> None:
    for program in running:
        if program.proc is not None and program.proc.poll() is None:
            program.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + float(os.environ.get("FAULTLINE_STOP_TIMEOUT_S") or 60)
    for program in running:
        if program.proc is None:
            continue
        try:
            program.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"{program.name} did not stop in time; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(program.proc.pid, signal.SIGKILL)


def main() -> int:
    stopping: list[int] = []

    def on_signal(signum, _frame) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    running = programs()
    try:
        while not stopping:
            now = time.monotonic()
            for program in running:
                program.reap()
                if program.proc is None and program.restart_at is not None and now >= program.restart_at:
                    program.start()
            time.sleep(0.2)
    finally:
        log("stopping")
        stop(running)
    return 0


if __name__ == "__main__":
    sys.exit(main())
