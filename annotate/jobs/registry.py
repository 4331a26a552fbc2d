"""Job kinds, after-import hooks and Celery tasks, found by registration: the runner knows no domain.

Each package that runs long work has a `handlers.py` whose functions are decorated with `@job_handler("kind")`
(and may register after-import hooks), and a `tasks.py` whose Celery tasks carry pinned names. Those modules
pull in numpy, scipy and the rest of their package, so they are imported on first use, not when Django starts:
`AnnotateConfig.ready()` hands `registrations_on_first_use` the function that imports them all, and
`handler_for`, `task_named` and the after-import hooks call `registrations_load()` before they look anything
up. A command that never starts a job never pays for them. The kind strings are stored in `Job.kind`: never
rename one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Handler = Callable[..., Any]  # handler(*, job, progress) -> dict | DEFERRED

HANDLERS: dict[str, Handler] = {}

_loaders: list[Callable[[], None]] = []
_loaded = False
_lock = threading.Lock()


def job_handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of jobs of `kind`."""

    def register(fn: Handler) -> Handler:
        known = HANDLERS.get(kind)
        if known is not None and (known.__module__, known.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"job kind '{kind}' already has a handler: {known.__module__}.{known.__qualname__}")
        HANDLERS[kind] = fn
        return fn

    return register


def registrations_on_first_use(loader: Callable[[], None]) -> None:
    """Run `loader` (it imports the registering modules) the first time anything is looked up."""
    _loaders.append(loader)


def registrations_load() -> None:
    """Import every registering module, once per process; later calls return at once."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for loader in _loaders:
            loader()
        _loaded = True


def handler_for(kind: str) -> Handler:
    """The handler of `kind`; ValueError for a kind nothing registered."""
    registrations_load()
    try:
        return HANDLERS[kind]
    except KeyError:
        raise ValueError(f"unknown job kind '{kind}'") from None


def task_named(name: str):
    """The Celery task registered under `name` (its pinned name), for modules its tasks.py imports."""
    from celery import current_app

    registrations_load()
    return current_app.tasks[name]
