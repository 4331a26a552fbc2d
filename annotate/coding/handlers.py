"""Job handlers of the coding package."""

from __future__ import annotations

from typing import Any

from annotate.coding.services import episodes_recount
from annotate.jobs.registry import job_handler


@job_handler("recount")
def job_recount(*, job, progress) -> dict[str, Any]:
    """Job handler: repair a study's episode counters."""
    progress(0, 1)
    fixed = episodes_recount(study=job.study)
    progress(1, 1)
    return {"fixed": fixed}


@job_handler("codebook_migration")
def job_codebook_migration(*, job, progress) -> dict[str, Any]:
    """Job handler: move a large study's codings to another codebook version (params: to, the codebook's id;
    map, the map document). The map is validated again: codings may have changed since it was made."""
    from annotate.coding.codebook_maps import codebook_map_validate
    from annotate.coding.codebook_moves import codings_migrate
    from taxonomy.models import Codebook

    target = Codebook.objects.get(pk=job.params["to"])
    moves = codebook_map_validate(study=job.study, to_codebook=target, raw=job.params["map"])
    migration = codings_migrate(
        study=job.study, to_codebook=target, moves=moves, user=job.created_by, progress=progress
    )
    return {"migration": migration.pk, "to": target.label, "counts": migration.counts}
