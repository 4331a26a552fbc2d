"""Dataset exports written to files (the command and the Parquet job) and `import_dataset`.

`import_dataset` loads an export back: it creates the study, its documents,
episodes, codings (with history), adjudications and suggestion provenance, in
one transaction, so that exporting the imported study gives the same rows.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from annotate.coding.disagreement import disagreement_refresh
from annotate.coding.labels import resolve_label
from annotate.coding.services import evidence_checked
from annotate.coding.visibility import FULL, Visibility
from annotate.exports import rows as exports
from annotate.exports.files import dataset_rows, file_sha256, manifest_for
from annotate.exports.filters import EpisodeFilter
from annotate.exports.parquet import parquet_write
from annotate.imports.parsed import clean_json
from annotate.models import (
    Adjudication,
    Coding,
    Document,
    Episode,
    EpisodeStatus,
    LabelRule,
    Membership,
    Role,
    Study,
    Suggestion,
    SuggestionBackend,
    SuggestionStatus,
)
from annotate.studies.services import queue_key_for, study_create
from taxonomy.models import Axis, AxisValue, Codebook, FailureType

EXPORT_DIR = "exports"


def export_episodes(
    *, study: Study, filters: dict[str, str] | None = None, visibility: Visibility = FULL
) -> QuerySet[Episode]:
    """The study's episodes narrowed by the list endpoints' filters; ValidationError with field errors if bad.

    `visibility` is whose view the filters take (the operator's command: everything).
    """
    request = SimpleNamespace(study=study, visibility=visibility)
    filterset = EpisodeFilter(filters or {}, queryset=Episode.objects.filter(study=study), request=request)
    if not filterset.is_valid():
        raise ValidationError({k: [str(e) for e in v] for k, v in filterset.errors.items()})
    return filterset.qs


def export_write(
    *,
    study: Study,
    fmt: str,
    out: Path,
    filters: dict[str, str] | None = None,
    coders: str = exports.CODERS_PSEUDONYMOUS,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write an export to `out` and its manifest beside it (`out` + ".manifest.json"). Returns the manifest."""
    if fmt not in exports.FORMATS:
        raise ValidationError({"format": f"unknown format '{fmt}' (choose {', '.join(exports.FORMATS)})"})
    episodes = export_episodes(study=study, filters=filters)
    total = episodes.count()
    digest = exports.Digest()
    tick = (lambda n: progress(n, total)) if progress else None
    out.parent.mkdir(parents=True, exist_ok=True)
    slots = None
    if fmt == "parquet":
        rows = digest.count(exports.export_rows(study, episodes, coders=coders))
        parquet_write(rows, str(out), progress=tick)
        with out.open("rb") as fh:
            for _chunk in digest.through(iter(lambda: fh.read(1 << 20), b"")):
                pass
    else:
        slots = exports.coder_slots(study, episodes) if fmt == "csv" else None
        with out.open("wb") as fh:
            for chunk in exports.export_stream(study=study, episodes=episodes, fmt=fmt, coders=coders, digest=digest):
                fh.write(chunk)
                if tick:
                    tick(digest.rows)
    man = exports.manifest(study=study, fmt=fmt, digest=digest, filters=dict(filters or {}), coders=coders, slots=slots)
    Path(f"{out}.manifest.json").write_text(json.dumps(man, indent=2) + "\n", encoding="utf-8")
    if progress:
        progress(total, total)
    return man


def export_file_path(job) -> Path:
    return Path(settings.MEDIA_ROOT) / EXPORT_DIR / f"{job.study.slug}-{job.pk}.parquet"


# ---- import_dataset ----


@dataclass
class _Lookup:
    types: dict[str, FailureType]
    values: dict[tuple[str, str], AxisValue]

    def type(self, code: str | None, where: str) -> FailureType | None:
        if code is None:
            return None
        if code not in self.types:
            raise ValidationError({"file": f"{where}: unknown failure type '{code}'"})
        return self.types[code]

    def earlier_type(self, code: str, where: str) -> FailureType:
        """A coding queued again after a codebook migration names its type of an earlier version of the
        same codebook: the newest version loaded here that has the code."""
        codebook = next(iter(self.types.values())).codebook
        found = (
            FailureType.objects.filter(codebook__name=codebook.name, code=code)
            .exclude(codebook=codebook)
            .order_by("-codebook__created_at", "-codebook_id")
            .first()
        )
        if found is None:
            raise ValidationError(
                {"file": f"{where}: a coding or adjudication waits for a new decision after a codebook migration from "
                 f"type '{code}', which no other version of {codebook.name} loaded here has; load that version first"}
            )  # fmt: skip
        return found

    def value(self, axis: str, code: str | None, where: str) -> AxisValue | None:
        if code is None:
            return None
        if (axis, code) not in self.values:
            raise ValidationError({"file": f"{where}: unknown {axis} '{code}'"})
        return self.values[(axis, code)]


def _dataset_user(username: str, group: Group):
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User(username=username, is_active=False)
        user.set_unusable_password()
        user.save()
        user.groups.add(group)
    elif not user.groups.filter(pk=group.pk).exists():
        raise ValidationError({"file": f"coder '{username}' is an existing account here, not a dataset coder"})
    return user


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass
class DatasetImport:
    study: Study
    rows: int
    codings: int
    adjudications: int
    suggestions: int


@transaction.atomic
def dataset_import(
    *, path: Path, slug: str | None = None, owner=None, coders_per_episode: int | None = None
) -> DatasetImport:
    """Load an export (JSONL, CSV or Parquet) into a new study. All or nothing.

    The codebook named in the file must exist. Coders become inactive accounts
    named by their pseudonym, in the "dataset-coders" group. The study's k and
    label rule come from the manifest beside the file (or `coders_per_episode`);
    every row's label must come out the same here, or nothing is written.
    """
    path = Path(path)
    man, rows, codebook = _dataset_read(path)
    slug = slug or rows[0]["study"]
    k = coders_per_episode or man.get("coders_per_episode") or 2
    study = study_create(slug=slug, name=man.get("study_name") or slug, codebook=codebook, owner=owner)
    study.coders_per_episode = k
    rule = man.get("label_rule") or LabelRule.CONSENSUS
    lookup = _Lookup(
        types={t.code: t for t in FailureType.objects.filter(codebook=codebook)},
        values={(v.axis, v.code): v for v in AxisValue.objects.filter(codebook=codebook)},
    )
    coders = _Coders(Group.objects.get_or_create(name=exports.DATASET_CODERS_GROUP)[0])
    study.label_coder = _label_coder(man, rule, coders)
    episodes = _episodes_create(study, rows, _documents_create(study, rows))
    suggestions, codings, adjudications = {}, [], []
    for n, (row, ep) in enumerate(zip(rows, episodes, strict=True), 1):
        where = f"row {n} ({row['external_id']})"
        ep.queue_key = queue_key_for(study, ep.pk)
        ep.created_at = _time(row["episode_created_at"]) or ep.created_at
        if row.get("suggestion_backend"):
            suggestions[ep.pk] = _row_suggestion(row, ep, lookup, slug=slug, where=where)
        codings += _row_codings(row, ep, lookup, coders, k=k, where=where)
        if _adjudicated(row):
            adjudications.append(_row_adjudication(row, ep, lookup, coders, where=where))
    created = _codes_store(suggestions, codings, adjudications)
    _episodes_finish(study, episodes, adjudications, k=k, rule=rule, coders=coders)
    _check_labels(
        study=study, rows=rows, episodes=episodes, codings=created, adjudications=adjudications, lookup=lookup
    )
    return DatasetImport(
        study=study, rows=len(rows), codings=len(created), adjudications=len(adjudications),
        suggestions=len(suggestions),
    )  # fmt: skip


def _label_coder(man: dict, rule: str, coders: _Coders):
    """Under single_coder, the coder whose labels are final, named in the manifest as in the rows."""
    if rule != LabelRule.SINGLE_CODER:
        return None
    name = man.get("label_coder")
    if not name:
        raise ValidationError({"file": "the manifest says label_rule single_coder but names no label_coder"})
    return coders(name)


def _dataset_read(path: Path) -> tuple[dict, list[dict], Codebook]:
    """The manifest beside the file ({} without one), the file's rows, and the codebook they name."""
    man = manifest_for(path)
    if man and man.get("sha256") and man["sha256"] != file_sha256(path):
        raise ValidationError({"file": f"'{path.name}' does not match the sha256 in its manifest"})
    rows = [clean_json(row) for row in dataset_rows(path)]
    if not rows:
        raise ValidationError({"file": f"'{path.name}' has no rows"})
    label = rows[0]["codebook"]
    name, _, version = label.rpartition("@")
    codebook = Codebook.objects.filter(name=name, version=version).first()
    if codebook is None:
        raise ValidationError({"file": f"codebook '{label}' is not loaded here; run load_codebook first"})
    for n, row in enumerate(rows, 1):
        if row["codebook"] != label or row["study"] != rows[0]["study"]:
            where = f"row {n} ({row.get('external_id')})"
            raise ValidationError({"file": f"{where}: every row must come from one study and codebook"})
    return man or {}, rows, codebook


class _Coders:
    """The dataset's coders by pseudonym: inactive accounts in the dataset-coders group, made once each."""

    def __init__(self, group: Group):
        self.group = group
        self.users: dict[str, Any] = {}

    def __call__(self, name: str):
        if name not in self.users:
            self.users[name] = _dataset_user(name, self.group)
        return self.users[name]


def _documents_create(study: Study, rows: list[dict]) -> dict[tuple[str, str], Document]:
    """One document per (kind, external id), with its import time; the body from a whole-document row."""
    docs: dict[tuple[str, str], Document] = {}
    for row in rows:
        key = (row["document_kind"], row["external_id"])
        doc = docs.get(key)
        if doc is None:
            doc = docs[key] = Document(
                study=study, kind=row["document_kind"], external_id=row["external_id"], url=row["url"] or "",
                cluster=row["cluster"], title=row["title"],
            )  # fmt: skip
            doc._imported_at = _time(row["imported_at"])
        if row["whole_document"]:
            doc.body = row["excerpt"]
    Document.objects.bulk_create(docs.values(), batch_size=1000)
    for doc in docs.values():
        doc.imported_at = doc._imported_at or doc.imported_at
    Document.objects.bulk_update(docs.values(), ["imported_at"], batch_size=1000)
    return docs


def _episodes_create(study: Study, rows: list[dict], docs: dict[tuple[str, str], Document]) -> list[Episode]:
    episodes = []
    for row in rows:
        ep = Episode(
            document=docs[(row["document_kind"], row["external_id"])], study=study, order=row["episode_order"] or 0,
            split=row["split"], excerpt="" if row["whole_document"] else row["excerpt"],
            start=row["excerpt_start"], end=row["excerpt_end"], n_codings=len(row["codings"]),
        )  # fmt: skip
        episodes.append(ep)
    Episode.objects.bulk_create(episodes, batch_size=1000)
    return episodes


def _row_suggestion(row: dict, ep: Episode, lookup: _Lookup, *, slug: str, where: str) -> Suggestion:
    if row["suggestion_backend"] not in SuggestionBackend.values:
        raise ValidationError({"file": f"{where}: unknown suggestion backend"})
    status = row["suggestion_status"] or SuggestionStatus.PENDING
    return Suggestion(
        episode=ep, backend=row["suggestion_backend"], model=row["suggestion_model"] or "",
        prompt_version=row["suggestion_prompt_version"] or "",
        failure_type=lookup.type(row["suggestion_failure_type"], where),
        confidence=row["suggestion_confidence"], status=status,
        cache_key=hashlib.sha256(f"dataset:{slug}:{ep.pk}".encode()).hexdigest(),
    )  # fmt: skip


def _row_codings(row: dict, ep: Episode, lookup: _Lookup, coders: _Coders, *, k: int, where: str) -> list[Coding]:
    if len(row["codings"]) > k:
        # The refusal of the coding service (k coders per episode), for a whole file at once.
        raise ValidationError(
            {"file": f"{where}: {len(row['codings'])} codings, more than the study's {k} coders per episode"}
        )
    text = row["excerpt"] or ""
    codings = []
    for c in row["codings"]:
        try:
            evidence, start, end = evidence_checked(text, c["evidence"] or "", None, None)
        except ValidationError as exc:
            raise ValidationError({"file": f"{where}: coder {c['coder']}: {exc.messages[0]}"}) from exc
        coding = Coding(
            episode=ep, coder=coders(c["coder"]), failure_type=lookup.type(c["failure_type"], where),
            source=lookup.value(Axis.SOURCE, c["source"], where),
            stage=lookup.value(Axis.STAGE, c["stage"], where),
            capability=lookup.value(Axis.CAPABILITY, c["capability"], where),
            not_a_failure=bool(c["not_a_failure"]), not_a_failure_reason=c["not_a_failure_reason"] or "",
            needs_new_type=bool(c["needs_new_type"]), confidence=c["confidence"] or "medium",
            evidence=evidence, evidence_start=start, evidence_end=end,
        )  # fmt: skip
        coding.failure_type_original = c.get("failure_type_original") or ""
        if (
            coding.failure_type is None
            and not (coding.not_a_failure or coding.needs_new_type)
            and coding.failure_type_original
        ):
            coding.recode_from = lookup.earlier_type(coding.failure_type_original, where)
        if coding.failure_type_original == c["failure_type"]:
            coding.failure_type_original = ""  # never moved: the export writes the code twice
        coding._times = (_time(c["created_at"]), _time(c["updated_at"]))
        coding._from_suggestion = c["from_suggestion"]
        codings.append(coding)
    return codings


def _adjudicated(row: dict) -> bool:
    """The row carries an adjudication: its own codes say so (any label rule), else an adjudicated label (files
    made before the adjudication's codes were exported, where only a consensus label shows them)."""
    if row.get("adjudication_not_a_failure") is not None:
        return True
    return row["label_status"] == "adjudicated"


def _row_adjudication(row: dict, ep: Episode, lookup: _Lookup, coders: _Coders, *, where: str) -> Adjudication:
    own = row.get("adjudication_not_a_failure") is not None
    prefix = "adjudication_" if own else "label_"
    adjudication = Adjudication(
        episode=ep,
        adjudicator=coders(row["adjudicator"] or "dataset-adjudicator"),
        failure_type=lookup.type(row[f"{prefix}failure_type"], where),
        source=lookup.value(Axis.SOURCE, row[f"{prefix}source"], where),
        stage=lookup.value(Axis.STAGE, row[f"{prefix}stage"], where),
        capability=lookup.value(Axis.CAPABILITY, row[f"{prefix}capability"], where),
        not_a_failure=bool(row[f"{prefix}not_a_failure"]),
        needs_new_type=bool(row[f"{prefix}needs_new_type"]),
        rationale=row["adjudication_rationale"] or "",
    )
    # An adjudication whose type a codebook migration split or retired awaits a new decision. It loads as it was
    # exported, still waiting, with the earlier decision kept on it (the type of the earlier version it names, the
    # axes it kept), as on the study exported: the adjudicator sees the old code. Loading it as a final label
    # would put an episode in the matrices that its own study leaves out until it is decided again.
    original = (row.get("adjudication_failure_type_original") or "") if own else ""
    if adjudication.failure_type is None and not (adjudication.not_a_failure or adjudication.needs_new_type):
        if not original:
            raise ValidationError(
                {"adjudication_failure_type_original": [
                    f"{where}: the adjudication awaits a new decision after a codebook migration, but the file does "
                    "not say its earlier type (an export made before adjudication_failure_type_original was written)"
                ]}
            )  # fmt: skip
        adjudication.recode_from = lookup.earlier_type(original, where)
    adjudication.failure_type_original = "" if original == row.get("adjudication_failure_type") else original
    return adjudication


def _codes_store(suggestions: dict[int, Suggestion], codings: list[Coding], adjudications: list) -> list[Coding]:
    """Suggestions, codings (with history, keeping the file's times) and adjudications; the codings created."""
    Suggestion.objects.bulk_create(suggestions.values(), batch_size=1000)
    for coding in codings:
        if coding._from_suggestion:
            coding.from_suggestion = suggestions.get(coding.episode_id)
    created = bulk_create_with_history(codings, Coding, batch_size=1000)
    for coding, original in zip(created, codings, strict=True):
        first, last = original._times
        coding.created_at, coding.updated_at = first or coding.created_at, last or coding.updated_at
    Coding.objects.bulk_update(created, ["created_at", "updated_at"], batch_size=1000)
    bulk_create_with_history(adjudications, Adjudication, batch_size=1000)
    _earlier_decisions_history(adjudications)
    return created


EARLIER_DECISION = "as exported: the decision before a codebook migration split or retired its type"
WAITING = "as exported: awaiting a new decision after a codebook migration"


def _earlier_decisions_history(adjudications: list[Adjudication]) -> None:
    """An adjudication loaded waiting for a new decision gets its earlier decision as its first history record
    (the type of the earlier version it names), then the waiting state as a change: its history reads as the
    exported study's did, decided, then moved by a migration."""
    waiting = [a for a in adjudications if a.recode_from_id is not None]
    if not waiting:
        return
    history = Adjudication.history.model
    now = timezone.now()
    earlier = [copy.copy(a) for a in waiting]
    for a in earlier:
        a.failure_type_id, a.recode_from_id = a.recode_from_id, None
    Adjudication.history.bulk_history_create(
        earlier, default_date=now - timedelta(milliseconds=1), default_change_reason=EARLIER_DECISION
    )
    latest = history.objects.filter(id__in=[a.pk for a in waiting]).exclude(history_change_reason=EARLIER_DECISION)
    latest.update(history_type="~", history_change_reason=WAITING, history_date=now)


def _episodes_finish(study: Study, episodes: list[Episode], adjudications: list, *, k: int, rule: str, coders) -> None:
    """Episode statuses and disagreement state, the study's k and label rule, and the coders' memberships."""
    adjudicated = {a.episode_id for a in adjudications}
    for ep in episodes:
        if ep.pk in adjudicated:
            ep.status = EpisodeStatus.ADJUDICATED
        else:
            ep.status = EpisodeStatus.CODED if ep.n_codings >= k else EpisodeStatus.OPEN
    Episode.objects.bulk_update(episodes, ["queue_key", "created_at", "status"], batch_size=1000)
    disagreement_refresh(study_id=study.pk)  # the study is new: all its episodes are these
    # Codings waiting to be coded again go back to their coders' queues, which look for them only in a study
    # marked `recoding` (annotate.coding.queue); on an adjudicated episode they wait for the adjudicator instead.
    recoding = Coding.objects.filter(episode__study=study, recode_from__isnull=False).exclude(
        episode__status=EpisodeStatus.ADJUDICATED
    )
    Study.objects.filter(pk=study.pk).update(
        coders_per_episode=k, label_rule=rule, label_coder=study.label_coder, recoding=recoding.exists(),
        data_version=F("data_version") + 1,
    )  # fmt: skip
    study.label_rule = rule
    for member in coders.users.values():
        Membership.objects.get_or_create(study=study, user=member, defaults={"role": Role.CODER})
    adjudicators = {a.adjudicator_id for a in adjudications}
    Membership.objects.filter(study=study, user_id__in=adjudicators).update(adjudicator=True)


def _check_labels(*, study: Study, rows: list[dict], episodes, codings, adjudications, lookup: _Lookup) -> None:
    """Every row's label must come out the same under the imported study's rule and k: its status, and its
    codes (a file whose label columns say one thing and its codings or adjudication another is refused, rather
    than loaded as whichever of the two the import happens to read)."""
    code_of = ({t.pk: t.code for t in lookup.types.values()}, {v.pk: v.code for v in lookup.values.values()})
    by_episode: dict[int, list] = {}
    for c in sorted(codings, key=lambda c: c.coder_id):
        by_episode.setdefault(c.episode_id, []).append(c)
    adj = {a.episode_id: a for a in adjudications}
    for n, (row, ep) in enumerate(zip(rows, episodes, strict=True), 1):
        label = resolve_label(
            adjudication=adj.get(ep.pk), codings=by_episode.get(ep.pk, []), k=study.coders_per_episode,
            rule=study.label_rule, label_coder_id=study.label_coder_id,
        )  # fmt: skip
        if (label.status, label.reason) != (row["label_status"], row["label_reason"]):
            raise ValidationError(
                {
                    "file": f"row {n} ({row['external_id']}): the file says {row['label_status']} "
                    f"{row['label_reason']!r}, but here it would be {label.status} {label.reason!r}; "
                    f"is coders_per_episode ({study.coders_per_episode}) right?"
                }
            )
        if label.usable:
            _check_label_codes(row, label, code_of, where=f"row {n} ({row['external_id']})")


def _check_label_codes(row: dict, label, code_of: tuple[dict[int, str], dict[int, str]], *, where: str) -> None:
    """The row's label_* columns against the label its codings and adjudication give (an adjudicated row's:
    its adjudication_* codes), the two flags included. The error is keyed by the column that disagrees."""
    types, values = code_of  # the two tables' ids overlap
    for axis in ("failure_type", "source", "stage", "capability"):
        here = (types if axis == "failure_type" else values).get(getattr(label, f"{axis}_id"))
        said = row.get(f"label_{axis}") or None
        if said != here:
            _label_refused(f"label_{axis}", said, here, where)
    for flag in ("not_a_failure", "needs_new_type"):
        said = row.get(f"label_{flag}")
        if said is not None and bool(said) != bool(getattr(label, flag)):
            _label_refused(f"label_{flag}", said, bool(getattr(label, flag)), where)


def _label_refused(column: str, said, here, where: str) -> None:
    raise ValidationError(
        {column: [f"{where}: {column} says {said!r}, but its codings and adjudication give {here!r}"]}
    )
