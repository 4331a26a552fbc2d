"""One producer thread ahead of its consumer: for work that overlaps with a wait (the database, mostly)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from queue import Full, Queue
from typing import Any, TypeVar

T = TypeVar("T")


def prefetched(items: Iterable[T], *, chunk: int = 500, ahead: int = 4, name: str = "prefetch") -> Iterator[T]:
    """`items`, produced in a second thread up to `ahead` chunks of `chunk` ahead of the consumer.

    Parsing an import file is pure Python and never touches the database, while writing spends
    much of its time waiting for the database, which lets another thread run: on two cores the
    parse of the next batch overlaps the write of the last. Items cross in chunks, as a queue
    hand-off per item would cost more than it saves. An exception is raised here after the items
    before it, exactly as iterating in this thread would raise it; closing the generator early
    (the writer failed, the client hung up) stops the producer. The producer closes `items` (a
    generator's `finally` runs there, in the thread that ran it) before its thread ends, and
    closing this generator waits for that.
    """
    handoff: Queue = Queue(maxsize=ahead)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        part: list = []
        try:
            for item in items:
                part.append(item)
                if len(part) >= chunk:
                    if not put(part):
                        return
                    part = []
        except BaseException as exc:  # handed to the consumer's thread, which raises it
            if not part or put(part):
                put(exc)
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        if not part or put(part):
            put(done)

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while (part := handoff.get()) is not done:
            if isinstance(part, BaseException):
                raise part
            yield from part
    finally:
        stop.set()
        worker.join()
