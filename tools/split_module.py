"""Split one module into several by line ranges, moving lines without rewriting them (the layout move).

    python tools/split_module.py SPEC.json

SPEC: {"source": "taxonomy/stats.py", "header_end": 44, "modules": {"lib/stats/designs.py": [[45, 265]], ...},
       "docstrings": {path: text}, "copy_consts": ["log"], "drop_consts": ["__all__"]}

Each new module gets the source's header imports and its own ranges. Top-level names a module uses but
another one defines are imported from their new home; a header constant goes to the one module that uses
it, or to the first module when several do. `ruff check --fix` then drops the imports a module does not use.
The source file is removed (git rm) once every new module is written.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def used_names(source: str) -> set[str]:
    tree = ast.parse(source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    # names in string annotations (from __future__ import annotations keeps them as code, not strings)
    return used


def module_name(path: str) -> str:
    return path[:-3].replace("/", ".").removesuffix(".__init__")


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    src = ROOT / spec["source"]
    lines = src.read_text().splitlines(keepends=True)
    header_end = spec["header_end"]
    header = lines[:header_end]
    header_tree = ast.parse("".join(header))
    imports = "".join(
        "".join(lines[n.lineno - 1 : n.end_lineno])
        for n in header_tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    )
    drop, copy = set(spec.get("drop_consts", ())), set(spec.get("copy_consts", ()))
    consts = [
        n
        for n in header_tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and not top_names(ast.Module(body=[n], type_ignores=[])) & drop
    ]
    bodies: dict[str, str] = {}
    for path, ranges in spec["modules"].items():
        bodies[path] = "".join("".join(lines[a - 1 : b]) for a, b in ranges)
    # header constants: to the one module that uses them, or the first that does
    const_home: dict[int, str] = {}
    for c in consts:
        names = top_names(ast.Module(body=[c], type_ignores=[]))
        users = [p for p, body in bodies.items() if names & used_names(body)]
        const_home[id(c)] = users[0] if users else next(iter(bodies))
    const_text = dict.fromkeys(bodies, "")
    for c in consts:
        text = "".join(lines[c.lineno - 1 : c.end_lineno])
        names = top_names(ast.Module(body=[c], type_ignores=[]))
        if names & copy:  # e.g. a module logger: every module that uses it gets its own
            for p, body in bodies.items():
                if names & used_names(body):
                    const_text[p] += text
        else:
            const_text[const_home[id(c)]] += text
    full = {p: const_text[p] + ("\n\n" if const_text[p] else "") + bodies[p] for p in bodies}
    defines = {p: top_names(ast.parse(text)) for p, text in full.items()}
    for path, text in full.items():
        needed: dict[str, list[str]] = {}
        used = used_names(text)
        for other, names in defines.items():
            if other == path:
                continue
            for name in sorted((names & used) - defines[path]):
                needed.setdefault(module_name(other), []).append(name)
        cross = "".join(f"from {m} import {', '.join(ns)}\n" for m, ns in needed.items())
        doc = spec.get("docstrings", {}).get(path, f"Moved from {spec['source']}.")
        out = f'"""{doc}"""\n\nfrom __future__ import annotations\n\n{imports}{cross}\n\n{text}'
        target = ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(out)
    if spec.get("remove_source", True):
        subprocess.run(["git", "rm", "-q", str(src)], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
