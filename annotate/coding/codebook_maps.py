"""The map that moves a study's codings to another codebook version: its file format, its validation, and the
table the mapping page starts from (pre-filled from the codebook diff).

The map file is JSON:

    {"from": "faultline@1.0",            optional; when given it must be the study's codebook
     "to": "faultline@1.1",              optional; when given it must be the target
     "types": {
        "TUS-03": "TUS-03",              one new code: the codings move (a rename; a merge when
        "OLD-01": "NEW-01",                several old codes name the same new one)
        "CRS-02": ["CRS-02", "CRS-07"],  several: a split, the codings are queued again
        "FUS-09": null                   null (or []): retired, the codings are queued again
     }}

A type of the old version left out of "types" keeps its code when the new version has it, and
must be mapped when the new version has not and codings or adjudications use it. Axis values
(sources, stages, capabilities) move by code; the new version must have every one in use.
Every problem is reported at once (MapError.problems) and nothing is written.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotate.models import Adjudication, Coding, Study
from taxonomy.models import AxisValue, Codebook, FailureType
from taxonomy.services import codebook_diff

MAP_KEYS = {"from", "to", "types"}


class MapError(ValueError):
    """A map that cannot be applied; `problems` lists every reason, one sentence each."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class TypeMove:
    """What happens to one type of the old version."""

    code: str
    targets: tuple[str, ...]

    @property
    def kind(self) -> str:
        if not self.targets:
            return "retired"
        if len(self.targets) > 1:
            return "split"
        return "kept" if self.targets == (self.code,) else "moved"

    @property
    def requeues(self) -> bool:
        return len(self.targets) != 1


def codebook_map_read(path: str | Path) -> dict:
    """Parse a map file (JSON, see the module docstring); MapError when it is not readable JSON."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MapError([f"cannot read {path}: {exc}"]) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MapError([f"{path} is not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"]) from exc


def _targets(code: str, value: Any, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if len(set(value)) != len(value):
            problems.append(f"types.{code}: a code is listed twice")
        return tuple(dict.fromkeys(value))
    problems.append(f"types.{code}: must be a code, a list of codes (a split) or null (retired)")
    return ()


def _used_type_codes(study: Study) -> Counter:
    """Codes of the study's current codebook in use, with the number of codings and adjudications on each."""
    used: Counter = Counter()
    for model in (Coding, Adjudication):
        rows = model.objects.filter(episode__study=study, failure_type__isnull=False).values_list("failure_type__code")
        used.update(code for (code,) in rows)
    return used


def _check_header(raw: dict, study: Study, to_codebook: Codebook, problems: list[str]) -> None:
    unknown = sorted(set(raw) - MAP_KEYS)
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)} (expected from, to, types)")
    for key, codebook in (("from", study.codebook), ("to", to_codebook)):
        if key in raw and raw[key] != codebook.label:
            problems.append(f"'{key}' is {raw[key]!r} but this move is {study.codebook.label} -> {to_codebook.label}")


def _check_target(study: Study, to_codebook: Codebook, problems: list[str]) -> None:
    if to_codebook.pk == study.codebook_id:
        problems.append(f"the study already uses {to_codebook.label}")
    if not to_codebook.is_published:
        problems.append(f"{to_codebook.label} is a draft: publish it before moving codings onto it")


def _check_axes(study: Study, to_codebook: Codebook, problems: list[str]) -> None:
    """Every axis value in use must exist, by code, in the new version."""
    new = set(AxisValue.objects.filter(codebook=to_codebook).values_list("axis", "code"))
    used: set[tuple[str, str]] = set()
    for model in (Coding, Adjudication):
        for axis in ("source", "stage", "capability"):
            codes = model.objects.filter(episode__study=study, **{f"{axis}__isnull": False}).values_list(
                f"{axis}__code", flat=True
            )
            used.update((axis, c) for c in codes.distinct())
    for axis, code in sorted(used - new):
        problems.append(f"{axis} '{code}' is used by codings but {to_codebook.label} has no such {axis}")


def codebook_map_validate(*, study: Study, to_codebook: Codebook, raw: Any) -> dict[str, TypeMove]:
    """The complete map, old code -> TypeMove, for every type of the study's codebook; MapError otherwise."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise MapError(["the map must be a JSON object with a 'types' object"])
    _check_header(raw, study, to_codebook, problems)
    _check_target(study, to_codebook, problems)
    types = raw.get("types", {})
    if not isinstance(types, dict):
        problems.append("'types' must be an object: old code -> new code, list of codes, or null")
        types = {}
    old = list(FailureType.objects.filter(codebook=study.codebook).values_list("code", flat=True))
    new = set(FailureType.objects.filter(codebook=to_codebook).values_list("code", flat=True))
    used = _used_type_codes(study)
    for code in sorted(set(types) - set(old)):
        problems.append(f"types.{code}: no type '{code}' in {study.codebook.label}")
    moves: dict[str, TypeMove] = {}
    for code in old:
        if code in types:
            targets = _targets(code, types[code], problems)
        elif code in new:
            targets = (code,)
        else:
            if used[code]:
                problems.append(
                    f"type '{code}' ({used[code]} coding(s)) is not in {to_codebook.label}: map it to a code, "
                    "a list of codes (a split) or null (retired)"
                )
            targets = ()
        for target in targets:
            if target not in new:
                problems.append(f"types.{code}: no type '{target}' in {to_codebook.label}")
        moves[code] = TypeMove(code, targets)
    _check_axes(study, to_codebook, problems)
    if problems:
        raise MapError(problems)
    return moves


@dataclass(frozen=True)
class MapRow:
    """One row of the mapping page: an old type, what the diff says of it, and the suggested targets."""

    code: str
    name: str
    change: str  # "same", "changed" (definition or name), "removed"
    used: int
    targets: tuple[str, ...]
    retired: bool


def codebook_map_prefill(*, study: Study, to_codebook: Codebook) -> list[MapRow]:
    """The mapping table pre-filled from the codebook diff, removed and changed types first.

    A type kept by code maps to itself. A removed type maps to the added type with the same
    name, if there is exactly one (a rename); otherwise it is left for the owner to choose.
    """
    diff = {(d.code, d.change) for d in codebook_diff(old=study.codebook, new=to_codebook) if d.kind == "type"}
    added = [code for code, change in diff if change == "added"]
    new_names = dict(FailureType.objects.filter(codebook=to_codebook, code__in=added).values_list("code", "name"))
    by_name: dict[str, list[str]] = {}
    for code, name in new_names.items():
        by_name.setdefault(name.strip().lower(), []).append(code)
    used = _used_type_codes(study)
    rows = []
    for code, name in FailureType.objects.filter(codebook=study.codebook).values_list("code", "name"):
        if (code, "removed") in diff:
            same_name = by_name.get(name.strip().lower(), [])
            targets = tuple(same_name) if len(same_name) == 1 else ()
            rows.append(MapRow(code, name, "removed", used[code], targets, not targets and not used[code]))
        else:
            change = "changed" if (code, "changed") in diff else "same"
            rows.append(MapRow(code, name, change, used[code], (code,), False))
    order = {"removed": 0, "changed": 1, "same": 2}
    return sorted(rows, key=lambda r: order[r.change])


def codebook_map_from_form(rows: list[tuple[str, str, bool]]) -> dict:
    """The map document from the page's rows (old code, comma-separated new codes, retired box)."""
    types: dict[str, Any] = {}
    problems = []
    for code, text, retired in rows:
        targets = [t.strip() for t in text.replace(";", ",").split(",") if t.strip()]
        if retired and targets:
            problems.append(f"{code}: either new code(s) or retired, not both")
        elif not retired and not targets:
            problems.append(f"{code}: give the new code(s), or tick retired")
        types[code] = None if retired else (targets[0] if len(targets) == 1 else targets)
    if problems:
        raise MapError(problems)
    return {"types": types}


def codebook_targets(study: Study) -> list[Codebook]:
    """Published versions the study could move to: other versions of the same codebook."""
    return list(
        Codebook.objects.filter(name=study.codebook.name, published_at__isnull=False)
        .exclude(pk=study.codebook_id)
        .order_by("-created_at", "-id")
    )
