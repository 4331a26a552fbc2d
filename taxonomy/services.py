"""Writes to the codebook: load, publish, revise. Plus its JSON export and diff."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from lib import safejson
from taxonomy.models import Axis, AxisValue, Category, Codebook, CodebookRule, FailureType

TOP_FIELDS = {"name", "version", "description", "axes", "categories", "types", "rules"}
VALUE_FIELDS = ("code", "name", "definition")
TYPE_TEXT_FIELDS = ("code", "name", "category", "definition", "example", "typical_source")
TYPE_LIST_FIELDS = ("indicators", "typical_stages", "typical_capabilities")
TYPE_FIELDS = set(TYPE_TEXT_FIELDS) | set(TYPE_LIST_FIELDS) | {"inspired_by"}
RULE_FIELDS = {"id", "applies_to", "rule"}


class CodebookError(ValueError):
    """A codebook file or revision that cannot be accepted; the message names the entry."""

    expected_failure = True  # a refusal of the input: logged as one line (annotate.jobs.runner)


@dataclass
class LoadResult:
    codebook: Codebook
    created: bool
    changed: bool
    counts: dict[str, int] = field(default_factory=dict)


def _require_text(entry: dict, key: str, where: str, *, allow_empty: bool = False) -> str:
    if key not in entry:
        raise CodebookError(f"{where}: missing field '{key}'")
    value = entry[key]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise CodebookError(f"{where}: field '{key}' must be a non-empty string")
    return value


def _require_str_list(entry: dict, key: str, where: str, *, required: bool = True) -> list[str]:
    if key not in entry:
        if required:
            raise CodebookError(f"{where}: missing field '{key}'")
        return []
    value = entry[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CodebookError(f"{where}: field '{key}' must be a list of strings")
    return value


def _check_keys(entry: Any, allowed: set[str], where: str) -> None:
    if not isinstance(entry, dict):
        raise CodebookError(f"{where}: must be a JSON object")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise CodebookError(f"{where}: unknown field(s) {', '.join(unknown)}")


def codebook_validate(data: Any) -> dict:
    """Check a codebook document completely; raise CodebookError naming the first bad entry."""
    _check_keys(data, TOP_FIELDS, "codebook")
    _require_text(data, "name", "codebook")
    _require_text(data, "version", "codebook")
    if not isinstance(data.get("description", ""), str):
        raise CodebookError("codebook: field 'description' must be a string")

    codes = _validate_axes(data)
    category_codes = _validate_categories(data)
    type_codes = _validate_types(data, codes, category_codes)
    _validate_rules(data, type_codes)
    return data


def _validate_axes(data: dict) -> dict[str, set[str]]:
    """The axes and their values; the codes of each axis."""
    axes = data.get("axes")
    if not isinstance(axes, dict):
        raise CodebookError("codebook: missing field 'axes' (an object with source, stage and capability)")
    unknown_axes = sorted(set(axes) - set(Axis.values))
    if unknown_axes:
        raise CodebookError(f"axes: unknown axis '{unknown_axes[0]}' (expected source, stage, capability)")
    codes: dict[str, set[str]] = {}
    for axis in Axis.values:
        values = axes.get(axis)
        if not isinstance(values, list) or not values:
            raise CodebookError(f"axes.{axis}: missing or empty list")
        seen: set[str] = set()
        for i, value in enumerate(values):
            where = f"axes.{axis}[{i}]"
            _check_keys(value, set(VALUE_FIELDS), where)
            code = _require_text(value, "code", where)
            where = f"axes.{axis}[{i}] (code '{code}')"
            for key in ("name", "definition"):
                _require_text(value, key, where)
            if code in seen:
                raise CodebookError(f"{where}: duplicate code '{code}' in axis {axis}")
            seen.add(code)
        codes[axis] = seen
    return codes


def _validate_categories(data: dict) -> set[str]:
    """The type categories; their codes."""
    categories = data.get("categories")
    if not isinstance(categories, list) or not categories:
        raise CodebookError("codebook: missing field 'categories' (a non-empty list)")
    category_codes: set[str] = set()
    for i, category in enumerate(categories):
        where = f"categories[{i}]"
        _check_keys(category, set(VALUE_FIELDS), where)
        code = _require_text(category, "code", where)
        where = f"categories[{i}] (code '{code}')"
        _require_text(category, "name", where)
        if "definition" in category and not isinstance(category["definition"], str):
            raise CodebookError(f"{where}: field 'definition' must be a string")
        if code in category_codes:
            raise CodebookError(f"{where}: duplicate category code '{code}'")
        category_codes.add(code)
    return category_codes


def _validate_types(data: dict, codes: dict[str, set[str]], category_codes: set[str]) -> set[str]:
    """The failure types, each naming known categories and axis values; their codes."""
    types = data.get("types")
    if not isinstance(types, list) or not types:
        raise CodebookError("codebook: missing field 'types' (a non-empty list)")
    type_codes: set[str] = set()
    for i, ftype in enumerate(types):
        where = f"types[{i}]"
        _check_keys(ftype, TYPE_FIELDS, where)
        code = _require_text(ftype, "code", where)
        where = f"types[{i}] (code '{code}')"
        if code in type_codes:
            raise CodebookError(f"{where}: duplicate type code '{code}'")
        type_codes.add(code)
        for key in TYPE_TEXT_FIELDS[1:]:
            _require_text(ftype, key, where)
        for key in TYPE_LIST_FIELDS:
            _require_str_list(ftype, key, where)
        _require_str_list(ftype, "inspired_by", where, required=False)
        if ftype["category"] not in category_codes:
            raise CodebookError(f"{where}: unknown category '{ftype['category']}'")
        if ftype["typical_source"] not in codes["source"]:
            raise CodebookError(f"{where}: unknown source '{ftype['typical_source']}' in typical_source")
        for key, axis in (("typical_stages", "stage"), ("typical_capabilities", "capability")):
            for value in ftype[key]:
                if value not in codes[axis]:
                    raise CodebookError(f"{where}: unknown {axis} '{value}' in {key}")
    return type_codes


def _validate_rules(data: dict, type_codes: set[str]) -> None:
    """The coding rules, each applying to known types or to a whole axis."""
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise CodebookError("codebook: field 'rules' must be a list")
    rule_ids: set[str] = set()
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        _check_keys(rule, RULE_FIELDS, where)
        rule_id = _require_text(rule, "id", where)
        where = f"rules[{i}] (id '{rule_id}')"
        if rule_id in rule_ids:
            raise CodebookError(f"{where}: duplicate rule id '{rule_id}'")
        rule_ids.add(rule_id)
        _require_text(rule, "rule", where)
        # A rule applies to types, or to a whole axis ("source" rules decide between sources).
        for code in _require_str_list(rule, "applies_to", where):
            if code not in type_codes and code not in Axis.values:
                raise CodebookError(f"{where}: unknown type or axis '{code}' in applies_to")


def codebook_read_file(path: str | Path) -> dict:
    """Parse and validate a codebook JSON file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CodebookError(f"cannot read {path}: {exc}") from exc
    try:
        data = safejson.loads(text)
    except safejson.JSONSyntaxError as exc:
        raise CodebookError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except safejson.JSONError as exc:
        raise CodebookError(str(exc)) from None
    return codebook_validate(data)


def codebook_export(*, codebook: Codebook) -> dict:
    """The codebook in our JSON format, the inverse of `codebook_load`."""
    values = list(codebook.axis_values.all())
    categories = list(codebook.categories.all())
    category_code = {c.pk: c.code for c in categories}
    data: dict[str, Any] = {
        "name": codebook.name,
        "version": codebook.version,
        "description": codebook.description,
        "axes": {
            axis: [{"code": v.code, "name": v.name, "definition": v.definition} for v in values if v.axis == axis]
            for axis in Axis.values
        },
        "categories": [{"code": c.code, "name": c.name, "definition": c.definition} for c in categories],
        "types": [
            {
                "code": t.code,
                "name": t.name,
                "category": category_code[t.category_id],
                "definition": t.definition,
                "indicators": t.indicators,
                "example": t.example,
                "typical_source": t.typical_source,
                "typical_stages": t.typical_stages,
                "typical_capabilities": t.typical_capabilities,
                "inspired_by": t.inspired_by,
            }
            for t in codebook.failure_types.all()
        ],
        "rules": [{"id": r.rule_id, "applies_to": r.applies_to, "rule": r.rule} for r in codebook.rules.all()],
    }
    return data


def _normalised(data: dict) -> dict:
    """A validated document with optional fields filled in, for comparison."""
    out = json.loads(json.dumps(data))
    out.setdefault("description", "")
    out.setdefault("rules", [])
    for category in out["categories"]:
        category.setdefault("definition", "")
    for ftype in out["types"]:
        ftype.setdefault("inspired_by", [])
    return out


def _upsert(model, existing: dict[Any, Any], key, rows: list[dict], fields: list[str], codebook: Codebook) -> None:
    """Update rows that exist by natural key, create the others, delete the rest."""
    keep = set()
    to_create, to_update = [], []
    for row in rows:
        k = row[key] if isinstance(key, str) else tuple(row[x] for x in key)
        keep.add(k)
        obj = existing.get(k)
        if obj is None:
            to_create.append(model(codebook=codebook, **row))
        else:
            for f in fields:
                setattr(obj, f, row[f])
            to_update.append(obj)
    stale = [obj.pk for k, obj in existing.items() if k not in keep]
    if stale:
        try:
            model.objects.filter(pk__in=stale).delete()
        except ProtectedError as exc:
            raise CodebookError(
                f"cannot remove {model._meta.verbose_name_plural} still used by codings: "
                + ", ".join(str(o) for o in list(exc.protected_objects)[:5])
            ) from exc
    model.objects.bulk_create(to_create)
    if to_update:
        model.objects.bulk_update(to_update, fields)


@transaction.atomic
def codebook_load(*, data: dict, publish: bool = False) -> LoadResult:
    """Create or update a codebook from a validated JSON document.

    A published codebook is immutable: loading a different document under its
    name@version is refused, and loading the same one is a no-op.
    """
    codebook_validate(data)
    data = _normalised(data)
    shared = Codebook.objects.select_for_update().filter(private=False)
    codebook = shared.filter(name=data["name"], version=data["version"]).first()
    created = codebook is None
    if codebook is not None:
        same = _normalised(codebook_export(codebook=codebook)) == data
        if codebook.is_published and not same:
            raise CodebookError(
                f"codebook {codebook.label} is published and immutable; "
                f"load the changes under a new version (see `revise_codebook`)"
            )
        if same:
            if publish and not codebook.is_published:
                codebook_publish(codebook=codebook)
            return LoadResult(codebook=codebook, created=False, changed=False, counts=_counts(codebook))
        codebook.description = data["description"]
        codebook.save(update_fields=["description"])
    else:
        codebook = Codebook.objects.create(name=data["name"], version=data["version"], description=data["description"])

    _write_contents(codebook, data)
    if publish:
        codebook_publish(codebook=codebook)
    return LoadResult(codebook=codebook, created=created, changed=True, counts=_counts(codebook))


@transaction.atomic
def codebook_load_private(*, data: dict) -> Codebook:
    """A new, published codebook that belongs to the study it is uploaded for (Codebook.private).

    It takes no shared NAME@VERSION, so it never clashes with a shared codebook or with another
    study's upload of the same name, and it is never listed for anyone outside its study.
    """
    codebook_validate(data)
    data = _normalised(data)
    codebook = Codebook.objects.create(
        name=data["name"], version=data["version"], description=data["description"], private=True
    )
    _write_contents(codebook, data)
    return codebook_publish(codebook=codebook)


def _write_contents(codebook: Codebook, data: dict) -> None:
    _upsert(
        AxisValue,
        {(v.axis, v.code): v for v in codebook.axis_values.all()},
        ("axis", "code"),
        [
            {"axis": axis, "code": v["code"], "name": v["name"], "definition": v["definition"], "order": i}
            for axis in Axis.values
            for i, v in enumerate(data["axes"][axis])
        ],
        ["name", "definition", "order"],
        codebook,
    )
    _upsert(
        Category,
        {c.code: c for c in codebook.categories.all()},
        "code",
        [
            {"code": c["code"], "name": c["name"], "definition": c["definition"], "order": i}
            for i, c in enumerate(data["categories"])
        ],
        ["name", "definition", "order"],
        codebook,
    )
    categories = {c.code: c for c in codebook.categories.all()}
    type_fields = [
        "name", "category", "definition", "indicators", "example", "typical_source",
        "typical_stages", "typical_capabilities", "inspired_by", "order",
    ]  # fmt: skip
    _upsert(
        FailureType,
        {t.code: t for t in codebook.failure_types.all()},
        "code",
        [
            {
                "code": t["code"],
                "name": t["name"],
                "category": categories[t["category"]],
                "definition": t["definition"],
                "indicators": t["indicators"],
                "example": t["example"],
                "typical_source": t["typical_source"],
                "typical_stages": t["typical_stages"],
                "typical_capabilities": t["typical_capabilities"],
                "inspired_by": t["inspired_by"],
                "order": i,
            }
            for i, t in enumerate(data["types"])
        ],
        type_fields,
        codebook,
    )
    _upsert(
        CodebookRule,
        {r.rule_id: r for r in codebook.rules.all()},
        "rule_id",
        [
            {"rule_id": r["id"], "applies_to": r["applies_to"], "rule": r["rule"], "order": i}
            for i, r in enumerate(data["rules"])
        ],
        ["applies_to", "rule", "order"],
        codebook,
    )


def _counts(codebook: Codebook) -> dict[str, int]:
    counts = {"types": codebook.failure_types.count(), "categories": codebook.categories.count()}
    for axis in Axis.values:
        counts[axis] = codebook.axis_values.filter(axis=axis).count()
    return counts


def codebook_publish(*, codebook: Codebook) -> Codebook:
    """Freeze a codebook. Publishing twice is harmless."""
    if codebook.published_at is None:
        codebook.published_at = timezone.now()
        codebook.save(update_fields=["published_at"])
    return codebook


@transaction.atomic
def codebook_revise(*, codebook: Codebook, version: str, description: str | None = None) -> Codebook:
    """Start a new draft version copied from `codebook`, which stays as it is."""
    if not version.strip():
        raise CodebookError("the new version must not be empty")
    if not codebook.private and Codebook.objects.filter(name=codebook.name, version=version, private=False).exists():
        raise CodebookError(f"codebook {codebook.name}@{version} already exists")
    data = codebook_export(codebook=codebook)
    revision = Codebook.objects.create(
        name=codebook.name,
        version=version,
        description=codebook.description if description is None else description,
        parent=codebook,
        private=codebook.private,
    )
    data["version"] = version
    _write_contents(revision, _normalised(data))
    return revision


def parse_codebook_label(label: str) -> Codebook:
    """Find a shared codebook by 'NAME@VERSION' (a study's private codebook has no such name)."""
    name, sep, version = label.partition("@")
    if not sep or not name or not version:
        raise CodebookError(f"expected NAME@VERSION, got '{label}'")
    codebook = Codebook.objects.filter(name=name, version=version, private=False).first()
    if codebook is None:
        raise CodebookError(f"no codebook {label}")
    return codebook


@dataclass(frozen=True)
class EntryDiff:
    kind: str  # "type", "category", "source", "stage", "capability", "rule"
    code: str
    change: str  # "added", "removed", "changed"
    fields: tuple[tuple[str, Any, Any], ...] = ()  # (field, old, new) for "changed"


def codebook_diff(*, old: Codebook, new: Codebook) -> list[EntryDiff]:
    """Entries added, removed and changed between two codebooks, field by field."""
    a, b = codebook_export(codebook=old), codebook_export(codebook=new)
    sections: list[tuple[str, list[dict], list[dict], str]] = [
        (axis, a["axes"][axis], b["axes"][axis], "code") for axis in Axis.values
    ]
    sections += [
        ("category", a["categories"], b["categories"], "code"),
        ("type", a["types"], b["types"], "code"),
        ("rule", a["rules"], b["rules"], "id"),
    ]
    diffs: list[EntryDiff] = []
    for kind, before, after, key in sections:
        old_by = {e[key]: e for e in before}
        new_by = {e[key]: e for e in after}
        for code, entry in new_by.items():
            if code not in old_by:
                diffs.append(EntryDiff(kind, code, "added"))
                continue
            changed = tuple(
                (f, old_by[code].get(f), entry.get(f))
                for f in entry
                if f != key and old_by[code].get(f) != entry.get(f)
            )
            if changed:
                diffs.append(EntryDiff(kind, code, "changed", changed))
        diffs.extend(EntryDiff(kind, code, "removed") for code in old_by if code not in new_by)
    return diffs
