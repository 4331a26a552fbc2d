"""Writes, one module per area (as Zulip's zerver/actions/): keyword-only, typed, atomic.

Import from the area module, e.g. `from annotate.services.studies import coding_save`.
The names below are re-exported for convenience.
"""

from annotate.services.studies import (
    CODING_FIELDS,
    CodingConflict,
    CodingValues,
    coding_delete,
    coding_save,
    coding_values_validate,
    episodes_recount,
    job_recount,
    membership_set,
    queue_key_for,
    study_create,
)

__all__ = [
    "CODING_FIELDS",
    "CodingConflict",
    "CodingValues",
    "coding_delete",
    "coding_save",
    "coding_values_validate",
    "episodes_recount",
    "job_recount",
    "membership_set",
    "queue_key_for",
    "study_create",
]
