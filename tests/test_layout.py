"""The places the layout move could break without an import error: names stored outside the code.

Pickled local models name their classes' modules, queued Celery messages name their tasks, Job rows name
their kinds, and backups name their models by app label. Each is pinned here against data written before
the move (at 74991ea), so a later move that forgets one fails a test instead of a deployment.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
import tomllib
import zlib
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
BEFORE = "74991ea"


def test_it_loads_a_local_model_pickled_before_the_move_and_scores_it_identically(monkeypatch):
    # Scored as then: without the cold prior fitted on real issues since (annotate.suggestions.cold_prior), which
    # changes every score by design.
    monkeypatch.setattr("annotate.suggestions.codebook_index.cold_prior", lambda spec: None)
    monkeypatch.setattr("annotate.suggestions.local_model.cold_prior", lambda spec: None)
    from annotate.suggestions.base import codebook_spec_from_data
    from annotate.suggestions.local import LocalSuggester
    from annotate.suggestions.local_model import model_loads as loads
    from conftest import CODEBOOK

    model = loads((DATA / f"local-model-{BEFORE}.joblib").read_bytes())
    expected = json.loads((DATA / f"local-model-{BEFORE}.answers.json").read_text())
    spec = codebook_spec_from_data(json.loads(CODEBOOK.read_text()))
    assert model.fingerprint == spec.fingerprint and model.n_train > 0
    answers = LocalSuggester(spec, model).suggest_texts(expected["texts"])
    got = [{"not_a_failure": a.not_a_failure, "candidates": [c.as_dict() for c in a.candidates]} for a in answers]
    assert [a["candidates"][0]["failure_type"] for a in got] == [
        a["candidates"][0]["failure_type"] for a in expected["answers"]
    ]
    for g, e in zip(got, expected["answers"], strict=True):
        assert g["not_a_failure"] == e["not_a_failure"]
        for gc, ec in zip(g["candidates"], e["candidates"], strict=True):
            assert {k: v for k, v in gc.items() if k != "confidence"} == {
                k: v for k, v in ec.items() if k != "confidence"
            }
            assert gc["confidence"] == pytest.approx(ec["confidence"], abs=1e-9)


def test_it_loads_old_models_through_the_shim_and_pickles_new_ones_under_their_new_module(monkeypatch):
    import sys

    from annotate.suggestions.local_model import model_dumps, model_loads

    blob = (DATA / f"local-model-{BEFORE}.joblib").read_bytes()
    model = model_loads(blob)
    assert type(model).__module__ == "annotate.suggestions.local_model"
    assert b"annotate.suggestions.local_model" in zlib.decompress(model_dumps(model))
    monkeypatch.setitem(sys.modules, "annotate.suggest_local", None)  # as if the shim were deleted
    with pytest.raises(ImportError):
        model_loads(blob)


@pytest.mark.django_db(transaction=True)
def test_it_restores_a_backup_written_before_the_move(tmp_path, capsys):
    with tarfile.open(DATA / f"backup-{BEFORE}.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    call_command("restore", str(tmp_path))
    from annotate.ops.backup import codings_digest, row_counts

    assert row_counts() == manifest["counts"] and manifest["counts"]["annotate.Coding"] > 100
    assert codings_digest() == manifest["codings_sha256"]
    assert "restored and verified" in capsys.readouterr().out


# Queued messages (and a worker of the previous release draining them) name tasks by these strings.
PINNED_TASKS = {
    "annotate.tasks.run_job",
    "annotate.tasks.deliver_webhook",
    "annotate.analysis_tasks.bootstrap_chunk",
    "annotate.analysis_tasks.bootstrap_combine",
    "annotate.analysis_tasks.bootstrap_failed",
    "annotate.analysis_tasks.bootstrap_labels",
    "annotate.analysis_tasks.bootstrap_scatter",
}


JOB_KINDS = {
    "recount", "suggest", "retrain", "audit", "import", "import_traces", "export_parquet", "bootstrap", "report",
    "codebook_migration", "search_index", "agreement", "coverage",
}  # fmt: skip


def test_it_registers_every_task_under_its_pinned_name():
    from config.celery import app

    app.loader.import_default_modules()
    ours = {name for name in app.tasks if name.startswith("annotate.")}
    assert ours == PINNED_TASKS


def test_it_keeps_the_job_kinds_stored_in_job_rows():
    from annotate.jobs.registry import HANDLERS, registrations_load

    registrations_load()

    assert set(HANDLERS) == JOB_KINDS


def test_a_process_loads_the_registering_modules_on_first_use_not_at_startup():
    """django.setup() stays light (no scipy, no handlers); the first lookup brings every kind, hook and task,
    and still no scipy, numpy, scikit-learn, openai or pyarrow."""
    code = """
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
import django
django.setup()
heavy = ("scipy", "annotate.analysis.handlers", "annotate.suggestions.handlers")
at_start = sorted(m for m in heavy if m in sys.modules)
from annotate.jobs.registry import HANDLERS, handler_for, task_named
from annotate.imports.hooks import HOOKS
handler_for("recount")
after = sorted(m for m in ("scipy", "numpy", "sklearn", "openai", "pyarrow") if m in sys.modules)
print(json.dumps({"at_start": at_start, "after": after, "kinds": sorted(HANDLERS), "hooks": [h.__name__ for h in HOOKS],
                  "webhook_task": task_named("annotate.tasks.deliver_webhook").name}))
"""
    env = {**os.environ, "FAULTLINE_DEV": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["at_start"] == []
    assert got["after"] == []  # the registering modules are thin: a job's work imports what it needs when it runs
    assert got["kinds"] == sorted(JOB_KINDS) and got["hooks"] == ["suggestions_after_import"]
    assert got["webhook_task"] == "annotate.tasks.deliver_webhook"


# ---- The layout itself: acyclic, small files, short functions, few loose modules ----------------------------

PACKAGES = ("lib", "taxonomy", "annotate", "api", "config")
MAX_FILE_LINES, MAX_FUNCTION_LINES, MAX_LOOSE_MODULES = 600, 80, 10


def production_modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for the project's own code (no tests, migrations or benches)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "tests" in parts or "migrations" in parts:
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Edges between the given modules from every import statement, function-level ones included."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def long_functions(modules: dict[str, Path], limit: int) -> list[str]:
    return [
        f"{path.relative_to(path.parents[len(name.split('.')) - 1])}:{node.lineno} {node.name} "
        f"({node.end_lineno - node.lineno + 1} lines)"
        for name, path in modules.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_the_import_graph_of_the_project_has_no_cycle_even_through_function_level_imports():
    modules = production_modules(ROOT)
    assert len(modules) > 150 and "annotate.jobs.runner" in modules and "lib.stats.bootstrap" in modules
    assert cycles(import_graph(modules)) == []


def test_the_cycle_finder_sees_a_cycle_hidden_in_a_function(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "annotate" / "a.py").write_text("from annotate.b import x\n")
    (tmp_path / "annotate" / "b.py").write_text("x = 1\n\n\ndef f():\n    from .c import y\n")
    (tmp_path / "annotate" / "c.py").write_text("def g():\n    from annotate import a\n")
    (tmp_path / "annotate" / "d.py").write_text("import annotate.a\n")
    modules = production_modules(tmp_path)
    assert cycles(import_graph(modules)) == [["annotate.a", "annotate.b", "annotate.c"]]


def test_no_production_module_is_over_600_lines_and_no_function_over_80():
    modules = production_modules(ROOT)
    too_long = {str(p.relative_to(ROOT)): n for p in modules.values() if (n := len(p.read_text().splitlines())) > 600}
    assert too_long == {}
    assert long_functions(modules, MAX_FUNCTION_LINES) == []


def test_the_size_checks_flag_a_long_function(tmp_path):
    (tmp_path / "annotate").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    (tmp_path / "annotate" / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    found = long_functions({"annotate.m": tmp_path / "annotate" / "m.py"}, MAX_FUNCTION_LINES)
    assert len(found) == 1 and "long (81 lines)" in found[0]


def test_annotate_keeps_few_loose_modules_and_one_package_per_sub_domain():
    loose = sorted(p.name for p in (ROOT / "annotate").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose
    for package in ("models", "jobs", "studies", "documents", "coding", "imports", "traces", "suggestions",
                    "incidents", "analysis", "exports", "ops", "views"):  # fmt: skip
        assert (ROOT / "annotate" / package / "__init__.py").is_file(), package


def test_the_private_module_contract_names_every_private_module():
    """pyproject's import-linter contract lists the private modules by name; a new one must be listed too."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in config if c["name"].startswith("api and views never reach")]
    private = {m for m in production_modules(ROOT) if m.startswith("annotate.") and m.rpartition(".")[2][0] == "_"}
    private -= {m for m in private if m.endswith("__init__")}
    assert set(contract["forbidden_modules"]) == private
