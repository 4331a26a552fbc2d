"""Analysis under one of the codebook versions a study used: its axes and its final labels.

A study moved to a revised codebook (annotate.coding.codebook_moves) keeps, per migration, every coding and
adjudication as the move found it (MigratedCode.before). The final labels under the version it moved away
from are those rows under the study's label rule: the same rule (annotate.coding.labels.resolve_label) that
gives the labels now. Codings and adjudications made after the move are not part of the earlier version;
episodes are taken with their splits as they are now. Matrices, contrasts and coverage under an earlier
version are computed from these labels, with that version's axes; the analysis of the current version reads
the study's codings as always (annotate.analysis.arrays.label_arrays).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from annotate.analysis.arrays import (
    KINDS,
    LABEL_FIELDS,
    Axes,
    LabelArrays,
    _collect,
    _part,
    _untouched_labels,
    codebook_axes,
    label_arrays,
    labels_join,
)
from annotate.analysis.params import MAX_B, ParameterError, Params, parse_params
from annotate.coding.codebook_moves import StudyVersion, codebook_versions
from annotate.coding.labels import CodingRow, resolve_label
from annotate.models import CodebookMigration, Episode, Study

CHUNK = 5000


@dataclass(frozen=True)
class VersionChoice:
    """The codebook version an analysis is asked for, checked against the versions the study used."""

    key: str | None  # None: the study's codebook now; else the earlier version's name@version
    chosen: StudyVersion
    versions: tuple[str, ...]  # every version the study used, the current one first

    @property
    def label(self) -> str:
        return self.chosen.label


def version_choice(study: Study, raw: str | None) -> VersionChoice:
    """The version named by `raw` (name@version or the bare version; empty: now). ParameterError names
    the field for a version the study never used. Naming the current version is the same as naming none,
    so that both give one stored result."""
    versions = codebook_versions(study)
    labels = tuple(v.label for v in versions)
    raw = (raw or "").strip()
    if not raw:
        return VersionChoice(None, versions[0], labels)
    chosen = next((v for v in versions if raw in (v.label, v.version)), None)
    if chosen is None:
        raise ParameterError({"version": [f"The study never used codebook version {raw!r}: choose one of "
                                          f"{', '.join(labels)}."]})  # fmt: skip
    return VersionChoice(None if chosen.migration is None else chosen.label, chosen, labels)


def version_axes(study: Study, choice: VersionChoice) -> Axes:
    return codebook_axes(study) if choice.chosen.migration is None else codebook_axes(study, choice.chosen.codebook)


def version_labels(study: Study, choice: VersionChoice, axes: Axes | None = None) -> LabelArrays:
    """The study's final labels under the chosen version, as arrays."""
    axes = axes or version_axes(study, choice)
    if choice.chosen.migration is None:
        return label_arrays(study, axes)
    return label_arrays_before(study, axes, choice.chosen.migration)


def label_arrays_before(study: Study, axes: Axes, migration: CodebookMigration) -> LabelArrays:
    """The final labels as `migration` found them, under the version it moved away from (`axes`): its record
    of each coding and adjudication in one query, the touched episodes in chunks, the rest counted by the
    database as label_arrays counts them."""
    codings: dict[int, list[CodingRow]] = {}
    adjudications: dict[int, CodingRow] = {}
    records = migration.rows.order_by().values_list("episode_id_at", "coder_id_at", "before")
    for episode_id, coder_id, before in records.iterator(chunk_size=CHUNK):
        row = CodingRow(
            episode_id, coder_id, before["failure_type_id"], before["source_id"], before["stage_id"],
            before["capability_id"], bool(before["not_a_failure"]), bool(before["needs_new_type"]),
            before.get("recode_from_id"),
        )  # fmt: skip
        if coder_id is None:
            adjudications[episode_id] = row
        else:
            codings.setdefault(episode_id, []).append(row)
    ids = sorted(set(codings) | set(adjudications))

    def touched():
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            for fields in Episode.objects.filter(study=study, id__in=chunk).order_by("id").values_list(*LABEL_FIELDS):
                rows = sorted(codings.get(fields[0], []), key=lambda c: c.coder_id)
                label = resolve_label(
                    adjudication=adjudications.get(fields[0]), codings=rows, k=study.coders_per_episode,
                    rule=study.label_rule, label_coder_id=study.label_coder_id,
                )  # fmt: skip
                yield fields, label

    excluded: dict[str, Counter] = {k: Counter() for k in KINDS}
    n, rows, holdout, touched_by, touched_holdout = _collect(touched(), axes, excluded, [])
    n += _untouched_labels(study, Episode.objects.filter(study=study), touched_by, touched_holdout, excluded, holdout)
    joined = labels_join(study, [_part(rows, excluded, holdout, n)])
    # The labels are as the migration found them: they last changed before it.
    return dataclasses.replace(joined, as_of=migration.created_at.isoformat())


def params_for(study: Study, raw: dict, *, max_bootstrap: int = MAX_B) -> tuple[Params, VersionChoice, Axes]:
    """Analysis parameters from raw values (query string, form, job params or command line) with the codebook
    version among them: the version is checked first, since the cell is named by that version's codes."""
    raw = dict(raw)
    choice = version_choice(study, raw.pop("version", None))
    axes = version_axes(study, choice)
    params = parse_params(axes, **raw, max_bootstrap=max_bootstrap, version=choice.key)
    return params, choice, axes
