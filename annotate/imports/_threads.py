"""Writers on several connections: batches written while the file is still being parsed, and the rest of the
spool in parallel."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from queue import Empty, Full, Queue

from django.conf import settings
from django.db import connection, transaction

from annotate.imports._spool import _Batches, _constraints_check_now
from annotate.imports.records import ImportResult, batches_data_changed, import_records
from annotate.models import Study


def import_writers() -> int:
    """How many connections write an import's batches at once: FAULTLINE_IMPORT_WRITERS on PostgreSQL
    (default 2), where each batch's inserts, full-text vectors and index entries cost the server far
    more than the spool costs us; always 1 on SQLite, which has one writer, and inside a transaction,
    whose uncommitted rows other connections cannot see."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return 1
    return max(1, settings.FAULTLINE_IMPORT_WRITERS)


# The interpreter's thread switch interval during an import, in seconds (Python's default is 5 ms).
IMPORT_SWITCH_INTERVAL = 0.0005


@contextmanager
def quick_thread_switches() -> Iterator[None]:
    """Let a thread that waits for the GIL have it within 0.5 ms rather than 5 ms, for the block.

    An import's parse (the critical path: the writers wait for its batches) gives up the GIL to read the
    file and to write the spool, and the writer threads give it up on every send to the database. Each
    time another thread that runs pure Python (the parse producer, a writer formatting COPY rows) takes it,
    the waiting one got it back only when that thread had held it for the whole interval. At 0.5 ms the
    job took 10-15% less wall time for 50,000 real-sized issues over HTTP (3.6-3.7 s against 4.3-5.4 s),
    with no more CPU. (Hashing no longer gives it up: records._sha256_hex.) The interval is the
    process's: two imports at once in one process restore it in turn."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, IMPORT_SWITCH_INTERVAL))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


_END = object()
EARLY_BACKLOG = 4  # batches


class _RolledBack(Exception):
    pass


class _EarlyWriters:
    """Write batches while the parse goes on, without giving up "a malformed file writes nothing".

    The parse takes one core for a third of an import; the writes, mostly the server's
    work, wait for it. Here `n` threads, each with its own connection, take the batches
    the parse offers whenever one of them is free (the parse never waits for them), and
    write them into one transaction per thread that stays open until the parse ends.
    `finish(commit=True)` (the whole file parsed) then commits them one after another,
    each with a checkpoint naming its batches; `finish(commit=False)` rolls them all back,
    so nobody ever sees a row of a file that turns out malformed. A batch the parse offered
    while every writer was busy is written from the spool afterwards, as before.

    A job whose worker dies during the parse starts again from nothing, as it did when
    nothing was written before the parse ended; after `finish`, batches commit one by one.
    """

    def __init__(self, n: int, *, study: Study, fresh: bool, batches: _Batches, on_batch) -> None:
        self.study, self.fresh, self.batches, self.on_batch = study, fresh, batches, on_batch
        # Room for a few batches more than there are writers: a batch the parse offers while every writer is busy
        # waits here for one rather than being read back from the spool later (decoding a spooled batch costs a
        # fifth of what parsing it did). A few batches of memory, whatever the size of the file.
        self.todo: Queue = Queue(maxsize=n + EARLY_BACKLOG)
        self.failed = threading.Event()
        self.commit = False
        self.errors: list[BaseException] = []
        self.written = 0  # batches written early, committed or not
        self.threads = [threading.Thread(target=self._run, name=f"import-early-{i}", daemon=True) for i in range(n)]
        for thread in self.threads:
            thread.start()

    def offer(self, index: int, items: list, digests: dict) -> bool:
        """Hand a parsed batch to a writer if one has room for it; whether one took it."""
        if self.failed.is_set():
            raise self.errors[0]
        try:
            self.todo.put_nowait((index, items, digests))
        except Full:
            return False
        return True

    def finish(self, *, commit: bool) -> None:
        """Commit (or roll back) every writer's batches and stop the writers; raises a writer's error."""
        self.commit = commit
        for _ in self.threads:  # every writer takes tasks until it gets this, even after an error
            while True:
                try:
                    self.todo.put(_END, timeout=0.1)
                    break
                except Full:
                    if not any(thread.is_alive() for thread in self.threads):
                        break
        for thread in self.threads:
            thread.join()
        if commit and self.errors:
            raise self.errors[0]

    def _fail(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.failed.set()

    def _run(self) -> None:
        from django.db import connections

        atomic = None
        staged: list[tuple[int, int, ImportResult]] = []
        try:
            while (task := self.todo.get()) is not _END:
                if self.failed.is_set():
                    continue
                index, items, digests = task
                try:
                    if atomic is None:
                        atomic = transaction.atomic()
                        atomic.__enter__()
                    result = import_records(study=self.study, records=items, result=ImportResult(), seen=set(),
                                            fresh=self.fresh, digests=digests, data_changed=False)  # fmt: skip
                    staged.append((index, len(items), result))
                    self.written += 1
                except BaseException as exc:
                    self._fail(exc)
                    if atomic is not None:
                        with suppress(Exception):  # the error is already told; the connection may be gone
                            atomic.__exit__(type(exc), exc, exc.__traceback__)  # rolls back
                        atomic = None
            if atomic is not None:
                self._close(atomic, staged)
        except BaseException as exc:  # not expected; told rather than lost with the thread
            self._fail(exc)
        finally:
            connections.close_all()

    def _close(self, atomic, staged: list[tuple[int, int, ImportResult]]) -> None:
        """Commit this writer's batches with their checkpoint, or roll them back. The shared lock is held
        until the commit, so checkpoints commit in the order they were counted (as _write_spooled_batch)."""
        held = False
        try:
            if not self.commit or self.failed.is_set():
                raise _RolledBack
            _constraints_check_now()
            self.batches.lock.acquire()
            held = True
            if self.failed.is_set():  # another writer's commit failed while this one waited
                raise _RolledBack
            batches_data_changed(study=self.study, results=[r for _, _, r in staged])
            saved = self.batches.checkpoint(staged, self.on_batch)  # undone by itself if it fails
        except BaseException as exc:
            if not isinstance(exc, _RolledBack):
                self._fail(exc)
            try:
                with suppress(Exception):
                    atomic.__exit__(type(exc), exc, exc.__traceback__)  # rolls back
            finally:
                if held:
                    self.batches.lock.release()
            return
        try:
            atomic.__exit__(None, None, None)  # commits
        except BaseException as exc:
            self.batches.restore(saved)
            self._fail(exc)
        finally:
            self.batches.lock.release()


def _write_in_threads(tasks: Iterator[tuple], write: Callable[..., None], writers: int, report: Callable) -> None:
    """Run write(*task) for every task on `writers` threads, each with its own database connection;
    `report()` runs in this thread after each task. The first error stops the rest (a batch in
    flight finishes or rolls back) and is raised here."""
    from django.db import connections

    todo: Queue = Queue(maxsize=writers)
    finished: Queue = Queue()
    failed = threading.Event()
    stop = object()

    def run() -> None:
        try:
            while (task := todo.get()) is not stop:
                if failed.is_set():
                    continue
                try:
                    write(*task)
                except BaseException as exc:  # handed to the main thread, which raises it
                    failed.set()
                    finished.put(exc)
                    continue
                finished.put(None)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, name=f"import-writer-{i}", daemon=True) for i in range(writers)]
    for thread in threads:
        thread.start()
    errors: list[BaseException] = []

    def drain(block: bool) -> None:
        while True:
            try:
                got = finished.get(block=block, timeout=0.05 if block else None)
            except Empty:
                return
            if got is None:
                report()
            else:
                errors.append(got)
            block = False

    try:
        for task in tasks:
            while not failed.is_set():
                try:
                    todo.put(task, timeout=0.05)
                    break
                except Full:
                    drain(block=False)
            drain(block=False)
            if failed.is_set():
                break
    except BaseException:
        # This thread failed (the spool, or report() finding the job's lease lost): the writers skip what
        # is still queued instead of writing it after the job has given up.
        failed.set()
        raise
    finally:
        for _ in threads:
            todo.put(stop)
        for thread in threads:
            thread.join()
        drain(block=False)
    if errors:
        raise errors[0]
