"""After-import hooks: what other packages do once an import job has created new episodes.

Packages above imports register a hook with `@on_imported` in their handlers.py, which the job registry
loads on first use (suggestions queues a batch for the new episodes), so imports never imports them. A hook takes the
finished job and returns entries for the job's summary. A hook that fails is logged and never fails the
import: its documents are committed by then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from annotate.jobs.registry import registrations_load

log = logging.getLogger(__name__)

Hook = Callable[..., dict[str, Any]]  # hook(*, job) -> summary entries

HOOKS: list[Hook] = []


def on_imported(fn: Hook) -> Hook:
    """Register `fn(*, job)` to run after every import job that created episodes."""
    if fn not in HOOKS:
        HOOKS.append(fn)
    return fn


def imported(*, job) -> dict[str, Any]:
    """Run every registered hook for a finished import job; their summary entries, merged in order."""
    registrations_load()
    summary: dict[str, Any] = {}
    for hook in HOOKS:
        try:
            summary.update(hook(job=job) or {})
        except Exception:  # a missing key or a broker hiccup must not undo a finished import
            log.warning("after-import hook %s failed for job %s", hook.__qualname__, job.pk, exc_info=True)
    return summary
