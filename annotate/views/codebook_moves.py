"""The codebook version page: move the study's codings to a revised version through a mapping table pre-filled
from the codebook diff, preview the counts, and revert the latest move (owners only)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotate.coding.codebook_maps import (
    MapError,
    MapRow,
    codebook_map_from_form,
    codebook_map_prefill,
    codebook_map_validate,
    codebook_targets,
)
from annotate.coding.codebook_moves import (
    RevertRefused,
    codebook_migration_revert,
    codebook_move_allowed,
    codings_migrate,
    codings_move_preview,
)
from annotate.jobs.runner import job_start
from annotate.models import CodebookMigration, Coding, Study
from annotate.views.access import study_view

# Above this many codings the move runs as a job with a progress bar: the bench moved 40,000 codings in
# 17 s on SQLite (bench/codebook_migration_bench.py), longer than a page should hold a request.
INLINE_LIMIT = 5_000


def _posted(rows: list[MapRow], post) -> list[MapRow]:
    """The table as the owner left it: each row's new codes and retired box from the POST."""
    return [
        MapRow(
            r.code, r.name, r.change, r.used,
            tuple(t.strip() for t in post.get(f"map-{r.code}", "").replace(";", ",").split(",") if t.strip()),
            bool(post.get(f"retired-{r.code}")),
        )
        for r in rows
    ]  # fmt: skip


def _apply(request: HttpRequest, study: Study, target, rows: list[MapRow]):
    """Validate the posted table, then preview the counts, move the codings, or start the move as a job
    (large studies): the counts, or the job."""
    raw = codebook_map_from_form([(r.code, ",".join(r.targets), r.retired) for r in rows])
    moves = codebook_map_validate(study=study, to_codebook=target, raw=raw)
    if request.POST.get("action") != "migrate":
        return codings_move_preview(study=study, to_codebook=target, moves=moves), None
    codebook_move_allowed(study=study, user=request.user)
    size = Coding.objects.filter(episode__study=study).count()
    if size > INLINE_LIMIT:
        return None, job_start(kind="codebook_migration", study=study, user=request.user,
                               params={"to": target.pk, "map": raw})  # fmt: skip
    return codings_migrate(study=study, to_codebook=target, moves=moves, user=request.user).counts, None


@require_http_methods(["GET", "POST"])
@study_view("owner")
def codebook_version(request: HttpRequest, study: Study) -> HttpResponse:
    targets = codebook_targets(study)
    chosen = request.POST.get("to") or request.GET.get("to")
    target = next((t for t in targets if str(t.pk) == chosen), targets[0] if targets else None)
    rows = codebook_map_prefill(study=study, to_codebook=target) if target else []
    if request.GET.get("format") == "json" and target:
        # "?" where the owner must still decide: the command then refuses the map, naming the type.
        types = {r.code: _map_value(r) for r in rows}
        return JsonResponse({"from": study.codebook.label, "to": target.label, "types": types})
    context = {"study": study, "targets": targets, "target": target, "problems": [], "preview": None}
    if request.method == "POST" and target is not None:
        rows = _posted(rows, request.POST)
        try:
            counts, job = _apply(request, study, target, rows)
        except (MapError, PermissionDenied) as exc:
            context["problems"] = getattr(exc, "problems", [str(exc)])
        else:
            if job is not None:
                return redirect("job_status", pk=job.pk)
            if request.POST.get("action") == "migrate":
                messages.success(request, f"Moved the codings to {target.label}: {_summary(counts)}.")
                return redirect("codebook_version", slug=study.slug)
            context["preview"] = count_lines(counts)
    context["rows"] = rows
    moves = study.codebook_migrations.select_related("from_codebook", "to_codebook", "created_by")
    context["migrations"] = [(m, count_lines(m.counts)) for m in moves]
    status = 400 if context["problems"] else 200
    return render(request, "annotate/codebook_version.html", context, status=status)


def _map_value(row: MapRow):
    if row.retired:
        return None
    if not row.targets:
        return "?"
    return row.targets[0] if len(row.targets) == 1 else list(row.targets)


COUNT_LABELS = {
    "codings": "codings in all",
    "moved": "codings moved to a new code (renamed or merged type)",
    "kept": "codings keep their code",
    "requeued": "codings queued again for their coder (split or retired type)",
    "held": "codings on adjudicated episodes on a split or retired type (the adjudication decides)",
    "without_type": "codings without a type (not a failure, needs a new type, or still queued)",
    "adjudications_moved": "adjudications moved to a new code",
    "adjudications_kept": "adjudications keep their code",
    "adjudications_requeued": "adjudications to decide again (split or retired type)",
    "adjudications_without_type": "adjudications without a type",
}


def count_lines(counts: dict) -> list[tuple[int, str]]:
    """A move's counts as (number, what) in a fixed order, for the page and its messages."""
    return [(counts[k], label) for k, label in COUNT_LABELS.items() if counts.get(k)]


def _summary(counts: dict) -> str:
    return "; ".join(f"{n} {label}" for n, label in count_lines(counts))


@require_POST
@study_view("owner")
def codebook_revert(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    migration = get_object_or_404(CodebookMigration, pk=pk, study=study)
    try:
        result = codebook_migration_revert(migration=migration, user=request.user)
    except RevertRefused as exc:
        messages.error(request, f"Not reverted: {exc}")
    else:
        messages.success(
            request,
            f"Reverted: the study is back on {migration.from_codebook.label}; {result['restored']} codings and "
            f"adjudications restored ({result['edited_since']} had been edited since; their edits stay in history).",
        )
    return redirect("codebook_version", slug=study.slug)
