"""Print the mutation score of `make mutation`: killed over the mutants not judged equivalent.

Reads mutmut's results (mutants/lib/stats/*.py.meta) and the list of survivors judged equivalent, kept in
the comment block of lib/tests/test_stats.py (one `#   MUTANT_NAME: reason` line each, under the line
`# Equivalent mutants`). Exits 1 when the score is below 90% or a listed mutant is no longer a survivor, so the
list cannot go stale silently.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parents[2]
METAS = ROOT / "mutants" / "lib" / "stats"
TESTS = ROOT / "lib" / "tests" / "test_stats.py"
TARGET = 90.0


def equivalent() -> dict[str, str]:
    text = TESTS.read_text()
    block = text.split("# Equivalent mutants", 1)[1] if "# Equivalent mutants" in text else ""
    found = {}
    for line in block.splitlines()[1:]:
        if not line.startswith("#"):
            break
        m = re.match(r"#\s+(lib\.stats\.\S+):\s*(.+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def main() -> int:
    codes = {}
    for meta in sorted(METAS.glob("*.py.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    status = {name: status_by_exit_code[code] for name, code in codes.items()}
    counts = Counter(status.values())
    equiv = equivalent()
    stale = sorted(n for n in equiv if status.get(n) != "survived")
    survivors = sorted(n for n, s in status.items() if s in ("survived", "suspicious", "no tests") and n not in equiv)
    killed = counts["killed"] + counts["timeout"] + counts["caught by type check"] + counts["segfault"]
    judged = len(status) - counts["skipped"] - counts["not checked"] - (len(equiv) - len(stale))
    score = 100 * killed / judged if judged else 0.0
    print(f"mutants {len(status)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"judged equivalent (listed in {TESTS.relative_to(ROOT)}): {len(equiv) - len(stale)}")
    for name in survivors:
        print(f"  not killed: {name} ({status[name]})")
    for name in stale:
        print(f"  listed as equivalent but {status.get(name, 'absent')}: {name}")
    print(f"score on non-equivalent mutants: {killed}/{judged} = {score:.1f}% (target {TARGET:.0f}%)")
    return 0 if score >= TARGET and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
