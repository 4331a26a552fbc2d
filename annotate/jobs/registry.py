"""Job kinds and their handlers, filled by registration: the runner knows no domain.

Each package that runs long work has a `handlers.py` whose functions are decorated with
`@job_handler("kind")`; `AnnotateConfig.ready()` imports those modules, so every process that set Django
up (web, worker, beat, commands, tests) knows every kind before it starts or runs a job. The kind strings
are stored in `Job.kind`: never rename one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Handler = Callable[..., Any]  # handler(*, job, progress) -> dict | DEFERRED

HANDLERS: dict[str, Handler] = {}


def job_handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of jobs of `kind`."""

    def register(fn: Handler) -> Handler:
        known = HANDLERS.get(kind)
        if known is not None and (known.__module__, known.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"job kind '{kind}' already has a handler: {known.__module__}.{known.__qualname__}")
        HANDLERS[kind] = fn
        return fn

    return register


def handler_for(kind: str) -> Handler:
    """The handler of `kind`; ValueError for a kind nothing registered."""
    try:
        return HANDLERS[kind]
    except KeyError:
        raise ValueError(f"unknown job kind '{kind}'") from None
