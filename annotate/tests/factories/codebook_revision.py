"""A revised codebook for the migration tests: agentic-failures@1.1 made from 1.0 with one change of each kind.

- a rename: SPC-01 becomes SPC-11 (same name, so the mapping page pre-fills it);
- a merge: PLN-02 is folded into PLN-01 (PLN-02 removed);
- a split: TUS-03 keeps its code and gains a sibling, TUS-09;
- a retirement: CTL-01 is removed.
"""

from __future__ import annotations

import copy

from taxonomy.models import Codebook
from taxonomy.services import codebook_export, codebook_load

MAP = {"types": {"SPC-01": "SPC-11", "PLN-02": "PLN-01", "TUS-03": ["TUS-03", "TUS-09"], "CTL-01": None}}


def revised_codebook(codebook: Codebook, *, version: str = "1.1", publish: bool = True) -> Codebook:
    data = codebook_export(codebook=codebook)
    data["version"] = version
    types = data["types"]
    by_code = {t["code"]: t for t in types}
    by_code["SPC-01"]["code"] = "SPC-11"
    tus03 = by_code["TUS-03"]
    sibling = copy.deepcopy(tus03)
    sibling.update(code="TUS-09", name=tus03["name"] + " (second half)")
    types.insert(types.index(tus03) + 1, sibling)
    data["types"] = [t for t in types if t["code"] not in ("PLN-02", "CTL-01")]
    for rule in data["rules"]:
        rule["applies_to"] = [
            {"SPC-01": "SPC-11"}.get(c, c) for c in rule["applies_to"] if c not in ("PLN-02", "CTL-01")
        ]
    data["rules"] = [r for r in data["rules"] if r["applies_to"]]
    return codebook_load(data=data, publish=publish).codebook
