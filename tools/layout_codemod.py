"""The layout move as a re-runnable rewrite: old module -> new module, applied to imports and dotted strings.

    python tools/layout_codemod.py absolutize      # relative imports -> absolute (once, before any move)
    python tools/layout_codemod.py move PACKAGE    # git mv PACKAGE's modules, then rewrite every reference
    python tools/layout_codemod.py rewrite         # rewrite references only (after a split done by hand)
    python tools/layout_codemod.py check           # list references to old module names that are left

A module that moves whole has one target. A module split by hand into several has a list of targets: each
imported name goes to the first target that defines it at top level, so `from annotate.services.imports
import import_file, RawWriter` becomes two imports. What the script cannot resolve (a split module imported
whole, a name no target defines) it prints with its place, and exits 1.

The map is the record of the move (docs/adr/0001-layout.md): keep entries after their move, so that a branch
written against the old names can be rebased and rewritten with `rewrite`.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["annotate", "api", "config", "taxonomy", "lib", "tests", "bench", "tools", "conftest.py", "manage.py"]
FIRST_PARTY = ("annotate", "api", "config", "taxonomy", "lib")

# package -> [(old module, new module or [split targets])]; the order of packages is the order of the move.
MOVES: dict[str, list[tuple[str, str | list[str]]]] = {
    "lib": [
        ("taxonomy.stats", ["lib.stats.designs", "lib.stats.bootstrap", "lib.stats.intervals",
                            "lib.stats.sensitivity_checks", "lib.stats.interrater", "lib.stats"]),
        ("taxonomy.attribution", "lib.stats.attribution"),
        ("config.prepared", "lib.db.prepared"),
        ("annotate.plans", "lib.db.plans"),
        ("annotate.prefetch", "lib.db.prefetch"),
        ("taxonomy.tests.test_stats", "lib.tests.test_stats"),
        ("taxonomy.tests.test_attribution", "lib.tests.test_attribution"),
        ("taxonomy.tests.mutation_score", "lib.tests.mutation_score"),
    ],
    "models": [],  # annotate.models stays importable as it was: the package re-exports every model
    "jobs": [
        ("annotate.jobs", ["annotate.jobs.runner", "annotate.jobs.registry"]),
    ],
    "studies": [
        ("annotate.services.studies", ["annotate.studies.services", "annotate.coding.services",
                                       "annotate.coding.handlers"]),
        ("annotate.services", ["annotate.studies.services", "annotate.coding.services"]),
        ("annotate.services.members", "annotate.studies.members"),
        ("annotate.services.tokens", "annotate.studies.tokens"),
        ("annotate.services.coding_settings", "annotate.studies.coding_settings"),
        ("annotate.selectors", "annotate.studies.selectors"),
        ("annotate.forms", "annotate.studies.forms"),
    ],
    "documents": [
        ("annotate.document_selectors", "annotate.documents.selectors"),
        ("annotate.services.documents", "annotate.documents.services"),
        ("annotate.search", "annotate.documents.search"),
        ("annotate.render", "annotate.documents.render"),
    ],
    "coding": [
        ("annotate.services.queue", "annotate.coding.queue"),
        ("annotate.services.adjudication", "annotate.coding.adjudication"),
        ("annotate.services.disagreement", "annotate.coding.disagreement"),
        ("annotate.labels", "annotate.coding.labels"),
        ("annotate.visibility", "annotate.coding.visibility"),
        ("annotate.evidence", "annotate.coding.evidence"),
        ("annotate.exposure", "annotate.coding.exposure"),
        ("annotate.exposure_selectors", "annotate.coding.experiment"),
        ("annotate.services.exposure", "annotate.coding.experiment"),
        ("annotate.coding_selectors", "annotate.coding.selectors"),
        ("annotate.coding_forms", "annotate.coding.forms"),
    ],
    "imports": [
        ("annotate.importers", ["annotate.imports.parsers", "annotate.imports.parsed", "annotate.imports._issues",
                                "annotate.imports._literature"]),
        ("annotate.github", "annotate.imports.github"),
        ("annotate.services.imports", ["annotate.imports.records", "annotate.imports.services",
                                       "annotate.imports._spool", "annotate.imports._threads",
                                       "annotate.imports.uploads", "annotate.imports.handlers", "lib.db.copy",
                                       "annotate.imports.parsers", "annotate.imports.parsed"]),
        ("annotate.management.importing", "annotate.imports.cli"),
    ],
    "traces": [
        ("annotate.traces", ["annotate.traces.parsers", "annotate.traces.parsed", "annotate.traces._logs",
                             "annotate.traces._spans"]),
        ("annotate.trace_selectors", "annotate.traces.selectors"),
        ("annotate.services.traces", ["annotate.traces.services", "annotate.traces.handlers",
                                      "annotate.suggestions.steps"]),
        ("annotate.suggest_steps", "annotate.suggestions.steps"),
    ],
    "suggestions": [
        ("annotate.suggest_base", "annotate.suggestions.base"),
        ("annotate.suggest_text", "annotate.suggestions._text"),
        ("annotate.suggest_local", ["annotate.suggestions.local", "annotate.suggestions.local_model",
                                    "annotate.suggestions.codebook_index"]),
        ("annotate.suggest_eval", "annotate.suggestions._eval"),
        ("annotate.suggest_active", "annotate.suggestions._active"),
        ("annotate.suggest_audit", "annotate.suggestions.audit"),
        ("annotate.llm", ["annotate.suggestions.llm", "annotate.suggestions.prompts"]),
        ("annotate.suggest_quality", "annotate.suggestions.quality"),
        ("annotate.suggestion_selectors", "annotate.suggestions.selectors"),
        ("annotate.services.suggestions", ["annotate.suggestions.services", "annotate.suggestions.handlers"]),
    ],
    "incidents": [
        ("annotate.incidents", "annotate.incidents.selectors"),
        ("annotate.services.incidents", "annotate.incidents.services"),
        ("annotate.webhooks", "annotate.incidents.webhooks"),
        ("annotate.services.webhooks", "annotate.incidents.webhook_settings"),
        ("annotate.tasks", "annotate.incidents.tasks"),
    ],
    "analysis": [
        ("annotate.analysis", ["annotate.analysis.arrays", "annotate.analysis.params", "annotate.analysis.documents",
                               "annotate.analysis.coders", "annotate.analysis.bootstrap"]),
        ("annotate.analysis_tasks", ["annotate.analysis.bootstrap", "annotate.analysis.tasks",
                                     "annotate.analysis.handlers"]),
        ("annotate.analysis_text", "annotate.analysis.text"),
        ("annotate.figures", "annotate.analysis.figures"),
        ("annotate.attribution", "annotate.analysis.attribution"),
        ("annotate.management.analysis_cli", "annotate.analysis.cli"),
    ],
    "exports": [
        ("annotate.exports", "annotate.exports.rows"),
        ("annotate.cases", "annotate.exports.cases"),
        ("annotate.filters", "annotate.exports.filters"),
        ("annotate.services.datasets", ["annotate.exports.datasets", "annotate.exports.handlers"]),
    ],
    "ops": [
        ("annotate.demo", "annotate.ops.demo"),
        ("annotate.backup", "annotate.ops.backup"),
    ],
    "tests": [
        ("annotate.tests.test_adjudication", "annotate.tests.coding.test_adjudication"),
        ("annotate.tests.test_coding_save", "annotate.tests.coding.test_coding_save"),
        ("annotate.tests.test_disagreement_state", "annotate.tests.coding.test_disagreement_state"),
        ("annotate.tests.test_evidence", "annotate.tests.coding.test_evidence"),
        ("annotate.tests.test_exposure", "annotate.tests.coding.test_exposure"),
        ("annotate.tests.test_labels", "annotate.tests.coding.test_labels"),
        ("annotate.tests.test_queue", "annotate.tests.coding.test_queue"),
        ("annotate.tests.test_analysis", "annotate.tests.analysis.test_analysis"),
        ("annotate.tests.test_analysis_worker", "annotate.tests.analysis.test_analysis_worker"),
        ("annotate.tests.test_attribution", "annotate.tests.analysis.test_attribution"),
        ("annotate.tests.test_plans", "annotate.tests.analysis.test_plans"),
        ("annotate.tests.test_cases_export", "annotate.tests.exports.test_cases_export"),
        ("annotate.tests.test_exports", "annotate.tests.exports.test_exports"),
        ("annotate.tests.test_export_read_ahead", "annotate.tests.exports.test_export_read_ahead"),
        ("annotate.tests.test_coding_settings", "annotate.tests.studies.test_coding_settings"),
        ("annotate.tests.test_create_study", "annotate.tests.studies.test_create_study"),
        ("annotate.tests.test_team", "annotate.tests.studies.test_team"),
        ("annotate.tests.test_demo", "annotate.tests.ops.test_demo"),
        ("annotate.tests.test_document_list_scale", "annotate.tests.documents.test_document_list_scale"),
        ("annotate.tests.test_render", "annotate.tests.documents.test_render"),
        ("annotate.tests.test_search", "annotate.tests.documents.test_search"),
        ("annotate.tests.test_github_import", "annotate.tests.imports.test_github_import"),
        ("annotate.tests.test_import_worker", "annotate.tests.imports.test_import_worker"),
        ("annotate.tests.test_import_xss", "annotate.tests.imports.test_import_xss"),
        ("annotate.tests.test_imports", "annotate.tests.imports.test_imports"),
        ("annotate.tests.test_imports_early", "annotate.tests.imports.test_imports_early"),
        ("annotate.tests.test_import_suggestions", "annotate.tests.imports.test_import_suggestions"),
        ("annotate.tests.test_jobs", "annotate.tests.jobs.test_jobs"),
        ("annotate.tests.test_lean_indexes", "annotate.tests.models.test_lean_indexes"),
        ("annotate.tests.test_suggest_audit", "annotate.tests.suggestions.test_suggest_audit"),
        ("annotate.tests.test_suggest_llm", "annotate.tests.suggestions.test_suggest_llm"),
        ("annotate.tests.test_suggest_local", "annotate.tests.suggestions.test_suggest_local"),
        ("annotate.tests.test_suggest_reading", "annotate.tests.suggestions.test_suggest_reading"),
        ("annotate.tests.test_suggest_steps", "annotate.tests.suggestions.test_suggest_steps"),
        ("annotate.tests.test_suggest_uncertain", "annotate.tests.suggestions.test_suggest_uncertain"),
        ("annotate.tests.test_suggest_worker", "annotate.tests.suggestions.test_suggest_worker"),
        ("annotate.tests.test_trace_entry_points", "annotate.tests.traces.test_trace_entry_points"),
        ("annotate.tests.test_trace_import", "annotate.tests.traces.test_trace_import"),
        ("annotate.tests.test_trace_spans", "annotate.tests.traces.test_trace_spans"),
        ("annotate.tests.test_triage_board", "annotate.tests.incidents.test_triage_board"),
        ("annotate.tests.test_analysis_pages", "annotate.tests.views.test_analysis_pages"),
        ("annotate.tests.test_coding_page", "annotate.tests.views.test_coding_page"),
        ("annotate.tests.test_document_pages", "annotate.tests.views.test_document_pages"),
        ("annotate.tests.test_episode_history", "annotate.tests.views.test_episode_history"),
        ("annotate.tests.test_healthz", "annotate.tests.views.test_healthz"),
        ("annotate.tests.test_leases_visible", "annotate.tests.views.test_leases_visible"),
        ("annotate.tests.test_progress", "annotate.tests.views.test_progress"),
        ("annotate.tests.test_queue_views", "annotate.tests.views.test_queue_views"),
        ("annotate.tests.test_readable_pages", "annotate.tests.views.test_readable_pages"),
        ("annotate.tests.test_study_pages", "annotate.tests.views.test_study_pages"),
        ("annotate.tests.test_suggestion_views", "annotate.tests.views.test_suggestion_views"),
        ("annotate.tests.test_workspace_header", "annotate.tests.views.test_workspace_header"),
        ("annotate.tests.test_workspace_permissions", "annotate.tests.views.test_workspace_permissions"),
        ("annotate.tests.analysis_factory", "annotate.tests.factories.analysis_factory"),
        ("annotate.tests.github_server", "annotate.tests.factories.github_server"),
        ("annotate.tests.llm_server", "annotate.tests.factories.llm_server"),
        ("annotate.tests.report_texts", "annotate.tests.factories.report_texts"),
        ("annotate.tests.trace_fixtures", "annotate.tests.factories.trace_fixtures"),
    ],
    "views": [
        ("annotate.access", ["annotate.views.access", "annotate.studies.access"]),
    ],
}  # fmt: skip

MAP: dict[str, str | list[str]] = {old: new for moves in MOVES.values() for old, new in moves}

# Strings that look like dotted paths but are names stored outside the code: Celery task names (pinned with
# name=..., named by queued messages) are never rewritten.
PINNED = {
    "annotate.tasks.run_job",
    "annotate.tasks.deliver_webhook",
    *(f"annotate.analysis_tasks.bootstrap_{x}" for x in ("chunk", "combine", "failed", "labels", "scatter")),
}


def module_path(module: str) -> Path:
    base = ROOT / Path(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def py_files() -> list[Path]:
    out: list[Path] = []
    for name in SOURCES:
        p = ROOT / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in sorted(p.rglob("*.py")) if "migrations" not in f.parts and ".venv" not in f.parts]
    return [f for f in out if f.resolve() != Path(__file__).resolve()]  # its own map names the old modules


_DEFINED: dict[str, tuple[set[str], set[str]]] = {}


def _names(module: str) -> tuple[set[str], set[str]]:
    """What a module defines at top level (functions, classes, assignments), and what it imports by name."""
    if module not in _DEFINED:
        own: set[str] = set()
        imported: set[str] = set()
        path = module_path(module)
        tree = ast.parse(path.read_text()) if path.exists() else ast.Module(body=[], type_ignores=[])
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Assign):
                own |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
            elif isinstance(node, ast.ImportFrom):
                imported |= {a.asname or a.name for a in node.names}
        _DEFINED[module] = (own, imported)
    return _DEFINED[module]


def defined(module: str) -> set[str]:
    own, imported = _names(module)
    return own | imported


def _is_module(module: str) -> bool:
    return module_path(module).exists()


class Unresolved(Exception):
    pass


def target_for(old: str, name: str | None) -> str:
    """Where `name` of old module `old` lives now (the module itself when name is None).

    Of the split targets, the module that defines the name, unless that one is private and a public module
    re-exports the name (parsers.py for the formats it dispatches to)."""
    new = MAP[old]
    if isinstance(new, str):
        return new
    facades = [m for m in new if module_path(m).name == "__init__.py"]
    if name is None and facades:
        return facades[0]  # a package that re-exports the old module's public names (lib.stats)
    if name is None:
        raise Unresolved(f"{old} was split into {new}: import the names from their new modules")
    public = [m for m in new if not m.rpartition(".")[2].startswith("_")]
    definers = [m for m in new if name in _names(m)[0] and module_path(m).name != "__init__.py"]
    if definers and definers[0] in public:
        return definers[0]
    for candidate in public:  # a private module's name, re-exported by a public one
        if name in _names(candidate)[1] and module_path(candidate).name != "__init__.py":
            return candidate
    if definers:
        return definers[0]
    for candidate in facades:
        if name in defined(candidate):
            return candidate
    raise Unresolved(f"{old}.{name}: no module of {new} defines it")


def split_module(dotted: str) -> tuple[str, str] | None:
    """The longest old module that prefixes `dotted`, and the rest ('' when it is the module itself)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if active(head):
            return head, ".".join(parts[i:])
        if _is_module(head) and head not in OLD_PACKAGES:
            return None  # a module that exists now: nothing to rewrite
    return None


def absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def rewrite_import(node: ast.stmt, module: str, is_package: bool, absolutize: bool) -> list[str] | None:
    """The new lines of one import statement (without indentation), or None when it stays as it is."""
    if isinstance(node, ast.Import):
        if absolutize:
            return None
        out, changed = [], False
        for alias in node.names:
            hit = split_module(alias.name)
            if hit and not hit[1]:
                new = target_for(hit[0], None)
                out.append(f"import {new} as {alias.asname or alias.name.rpartition('.')[2]}")
                changed = True
            elif hit:
                raise Unresolved(f"import {alias.name}: import the module it names instead")
            else:
                out.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
        return out if changed else None
    assert isinstance(node, ast.ImportFrom)
    base = absolute(node, module, is_package)
    if absolutize:
        return [f"from {base} import {_aliases(node.names)}"] if node.level else None
    if node.level:
        raise Unresolved("relative import: run `absolutize` first")
    groups: dict[str, list[str]] = {}
    changed = False
    for alias in node.names:
        as_ = f" as {alias.asname}" if alias.asname else ""
        full = f"{base}.{alias.name}"
        if _is_module(full) and not active(full):
            groups.setdefault(base, []).append(alias.name + as_)  # a module of the new layout
        elif active(full) and not (active(base) and alias.name in defined_somewhere(base)):
            new = target_for(full, None)  # `from pkg import module`, and the module moved
            parent, _, leaf = new.rpartition(".")
            groups.setdefault(parent, []).append(leaf + (as_ or (f" as {alias.name}" if leaf != alias.name else "")))
            changed = True
        elif active(base):
            groups.setdefault(target_for(base, alias.name), []).append(alias.name + as_)
            changed = True
        else:
            groups.setdefault(base, []).append(alias.name + as_)
    if not changed:
        return None
    return [f"from {mod} import {', '.join(names)}" for mod, names in groups.items()]


def _aliases(names: list[ast.alias]) -> str:
    return ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in names)


def defined_somewhere(old: str) -> set[str]:
    new = MAP[old]
    return set().union(*(defined(m) for m in ([new] if isinstance(new, str) else new)))


# Old modules that were packages (a package's __init__ is gone only once the package is).
OLD_PACKAGES = {"annotate.services"}


def active(old: str) -> bool:
    """An entry applies once its old module is gone (a module that became a package of the same name is gone
    when its .py file is)."""
    if old not in MAP:
        return False
    base = ROOT / Path(*old.split("."))
    if old in OLD_PACKAGES:  # gone, or emptied of the names it re-exported
        init = base / "__init__.py"
        return not init.exists() or not init.read_text().strip()
    return not base.with_suffix(".py").exists()


STRING = re.compile(r"""^(?P<q>[rbuRBU]*["'])(?P<path>(?:annotate|taxonomy|config)(?:\.\w+)+)(?P<end>["'])$""")


def rewrite_strings(source: str) -> str:
    """Dotted paths in string literals: mock.patch targets, monkeypatch.setattr targets, handler names."""
    edits = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.STRING:
            continue
        m = STRING.match(tok.string)
        if not m or m["path"] in PINNED:
            continue
        hit = split_module(m["path"])
        if not hit:
            continue
        old, rest = hit
        first = rest.split(".")[0] if rest else None
        try:
            new = target_for(old, first)
        except Unresolved:
            if rest:
                raise
            continue
        edits.append((tok.start, tok.end, f"{m['q']}{new}{'.' + rest if rest else ''}{m['end']}"))
    if not edits:
        return source
    lines = source.splitlines(keepends=True)
    for (sl, sc), (el, ec), text in reversed(edits):
        assert sl == el
        line = lines[sl - 1]
        lines[sl - 1] = line[:sc] + text + line[ec:]
    return "".join(lines)


def rewrite_file(path: Path, *, absolutize: bool) -> tuple[bool, list[str]]:
    source = path.read_text()
    module = module_of(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    problems: list[str] = []
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        try:
            new = rewrite_import(node, module, is_package, absolutize)
        except Unresolved as exc:
            problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {exc}")
            continue
        if new is None:
            continue
        first = lines[node.lineno - 1]
        if first[: node.col_offset].strip():  # `if x: import y` on one line: leave it to a person
            problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: import shares its line; rewrite by hand")
            continue
        indent = first[: node.col_offset]
        span = lines[node.lineno - 1 : node.end_lineno]
        comments = [c for line in span for c in re.findall(r"#.*$", line.rstrip("\n"))]
        note = "  " + " ".join(comments) if comments else ""
        text = "".join(f"{indent}{line}{note}\n" for line in new)
        tail = lines[node.end_lineno - 1][node.end_col_offset :]
        if tail.strip() and not tail.strip().startswith("#"):
            problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: code after the import; rewrite by hand")
            continue
        edits.append((node.lineno, node.end_lineno, text))
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1 : end] = [text]
    out = "".join(lines)
    if not absolutize:
        try:
            out = rewrite_strings(out)
        except Unresolved as exc:
            problems.append(f"{path.relative_to(ROOT)}: string {exc}")
    if out != source:
        path.write_text(out)
        return True, problems
    return False, problems


def git_mv(old: str, new: str) -> None:
    # The old module's own file: a package of the same name may already exist beside it (annotate/exports/).
    src, dst = ROOT / Path(*old.split(".")).with_suffix(".py"), ROOT / Path(*new.split(".")).with_suffix(".py")
    if not src.exists() or dst.exists():
        return
    for parent in reversed(dst.relative_to(ROOT).parents[:-1]):
        pkg = ROOT / parent
        pkg.mkdir(exist_ok=True)
        init = pkg / "__init__.py"
        if not init.exists():
            init.write_text("")
            subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
    subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"absolutize", "move", "rewrite", "check"}:
        print(__doc__)
        return 2
    if argv[0] == "move":
        for old, new in MOVES[argv[1]]:
            if isinstance(new, str):
                git_mv(old, new)
    changed, problems = 0, []
    for path in py_files():
        if argv[0] == "check":
            continue
        did, probs = rewrite_file(path, absolutize=argv[0] == "absolutize")
        changed += did
        problems += probs
    if argv[0] == "check":  # mentions anywhere, comments and docstrings included, that name a module now gone
        for path in py_files():
            for n, line in enumerate(path.read_text().splitlines(), 1):
                for m in re.finditer(r"(?<![\w.])(?:annotate|taxonomy|config)(?:\.\w+)+", line):
                    name, hit = m.group(0), split_module(m.group(0))
                    if not hit or any(p.startswith(name) for p in PINNED):
                        continue
                    if not hit[1] and _is_module(name):
                        continue  # a module that became a package of the same name: the package is meant
                    problems.append(f"{path.relative_to(ROOT)}:{n}: mentions {name}")
    print(f"{changed} files rewritten")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
