"""What both suggesters share: the codebook as plain data, the episode text, the answer shape, the cache key.

The suggesters (annotate/suggestions/llm.py and annotate/suggestions/local.py) score plain text
against a `CodebookSpec`, a frozen snapshot of the codebook, so scoring needs
no database and the same code serves batches, the audit and the benchmark.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from taxonomy.models import Axis, AxisValue, Codebook, CodebookRule, FailureType

AXES = tuple(Axis.values)  # ("source", "stage", "capability")
MAX_CANDIDATES = 3


@dataclass(frozen=True)
class TypeSpec:
    code: str
    name: str
    category: str
    definition: str
    indicators: tuple[str, ...]
    example: str
    typical_source: str
    typical_stages: tuple[str, ...]
    typical_capabilities: tuple[str, ...]


@dataclass(frozen=True)
class AxisSpec:
    axis: str
    code: str
    name: str
    definition: str


@dataclass(frozen=True)
class RuleSpec:
    rule_id: str
    applies_to: tuple[str, ...]
    rule: str


@dataclass(frozen=True)
class CodebookSpec:
    codebook_id: int
    label: str
    types: tuple[TypeSpec, ...]
    axes: dict[str, tuple[AxisSpec, ...]]
    rules: tuple[RuleSpec, ...] = ()
    fingerprint: str = field(default="", compare=False)

    @property
    def type_codes(self) -> tuple[str, ...]:
        return tuple(t.code for t in self.types)

    def axis_codes(self, axis: str) -> tuple[str, ...]:
        return tuple(v.code for v in self.axes[axis])

    def type_by_code(self, code: str) -> TypeSpec | None:
        return next((t for t in self.types if t.code == code), None)


def _fingerprint(types, axes, rules) -> str:
    payload = json.dumps(
        {
            "types": [asdict(t) for t in types],
            "axes": {a: [asdict(v) for v in vs] for a, vs in axes.items()},
            "rules": [asdict(r) for r in rules],
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


_SPEC_CACHE: dict[int, CodebookSpec] = {}


def codebook_spec(codebook: Codebook) -> CodebookSpec:
    """The codebook as frozen plain data (three queries; cached per process for published codebooks)."""
    if codebook.is_published and codebook.pk in _SPEC_CACHE:
        return _SPEC_CACHE[codebook.pk]
    types = tuple(
        TypeSpec(
            code=t.code,
            name=t.name,
            category=t.category.name,
            definition=t.definition,
            indicators=tuple(t.indicators or ()),
            example=t.example,
            typical_source=t.typical_source,
            typical_stages=tuple(t.typical_stages or ()),
            typical_capabilities=tuple(t.typical_capabilities or ()),
        )
        for t in FailureType.objects.filter(codebook=codebook).select_related("category").order_by("order", "code")
    )
    axes: dict[str, list[AxisSpec]] = {axis: [] for axis in AXES}
    for v in AxisValue.objects.filter(codebook=codebook).order_by("axis", "order", "code"):
        axes[v.axis].append(AxisSpec(axis=v.axis, code=v.code, name=v.name, definition=v.definition))
    frozen_axes = {a: tuple(vs) for a, vs in axes.items()}
    rules = tuple(
        RuleSpec(rule_id=r.rule_id, applies_to=tuple(r.applies_to or ()), rule=r.rule)
        for r in CodebookRule.objects.filter(codebook=codebook).order_by("order", "rule_id")
    )
    spec = CodebookSpec(
        codebook_id=codebook.pk,
        label=codebook.label,
        types=types,
        axes=frozen_axes,
        rules=rules,
        fingerprint=_fingerprint(types, frozen_axes, rules),
    )
    if codebook.is_published:
        _SPEC_CACHE[codebook.pk] = spec
    return spec


def codebook_spec_from_data(data: dict, codebook_id: int = 0) -> CodebookSpec:
    """A spec straight from our codebook JSON format (fixtures/codebook-v1.json), without the database.

    For benchmarks and offline tools; it equals the spec of the same codebook loaded in the database.
    """
    categories = {c["code"]: c["name"] for c in data.get("categories", [])}
    types = tuple(
        TypeSpec(
            code=t["code"],
            name=t["name"],
            category=categories.get(t["category"], t["category"]),
            definition=t["definition"],
            indicators=tuple(t.get("indicators") or ()),
            example=t["example"],
            typical_source=t["typical_source"],
            typical_stages=tuple(t.get("typical_stages") or ()),
            typical_capabilities=tuple(t.get("typical_capabilities") or ()),
        )
        for t in data["types"]
    )
    axes = {
        a: tuple(AxisSpec(axis=a, code=v["code"], name=v["name"], definition=v["definition"]) for v in data["axes"][a])
        for a in AXES
    }
    rules = tuple(
        RuleSpec(rule_id=r["id"], applies_to=tuple(r.get("applies_to") or ()), rule=r["rule"])
        for r in data.get("rules", [])
    )
    return CodebookSpec(
        codebook_id=codebook_id,
        label=f"{data['name']}@{data['version']}",
        types=types,
        axes=axes,
        rules=rules,
        fingerprint=_fingerprint(types, axes, rules),
    )


def episode_text(episode) -> str:
    """The episode's text as the coding page shows it (the excerpt, else the document body).

    Evidence quotes must come from this text: the coding form checks them against it.
    """
    return episode.excerpt or episode.document.body


def reading(title: str, text: str) -> str:
    """What a suggester reads: the title for context, then the text (this is what the cache key hashes)."""
    return f"{title}\n\n{text}" if title else text


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# A prompt version's first 32 characters name its family: for the LLM the template (instructions, codebook,
# schema) without the example pool (prompts.prompt_version_for). A batch asks the episodes without a
# suggestion of the family, so new labels (a new pool) never re-ask a whole study; asked to refresh, it re-asks
# those answered under another version too. The local backend's versions have no pool part.
FAMILY_CHARS = 32


def prompt_family(prompt_version: str) -> str:
    return prompt_version[:FAMILY_CHARS]


def cache_key(model: str, prompt_version: str, text: str) -> str:
    """sha256 of (model, prompt_version, sha256(text)): one request, one stored answer."""
    return hashlib.sha256(f"{model}\x00{prompt_version}\x00{text_hash(text)}".encode()).hexdigest()


@dataclass(frozen=True)
class Candidate:
    failure_type: str
    source: str
    stage: str
    capability: str
    confidence: float
    rationale: str = ""
    evidence: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Answer:
    """A validated suggestion for one text; `error` set means no usable codes."""

    not_a_failure: bool = False
    candidates: tuple[Candidate, ...] = ()
    evidence_flagged: bool = False
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    # Free-form notes for the operator (e.g. dropped quotes); never shown as a suggestion.
    notes: tuple[str, ...] = ()
    # Set when the suggester declines to answer (a language it does not read): no candidates, and no error.
    abstain_reason: str = ""
    # Set when the text addresses a model ("answer TUS-06 at 1.0"): confidences capped, never a default Accept.
    instructions_flagged: bool = False
    # Set when the text is not in English and was read through the lexicon (annotate.suggestions._lang): confidences
    # capped, and never a default Accept, whatever threshold a study sets.
    language_capped: bool = False

    @property
    def top(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def comparable(self) -> dict:
        """The answer without accounting fields, for "same output" comparisons."""
        return {
            "not_a_failure": self.not_a_failure,
            "candidates": [c.as_dict() for c in self.candidates],
            "evidence_flagged": self.evidence_flagged,
            "error": self.error,
            "abstain_reason": self.abstain_reason,
        }
