"""The places the layout move could break without an import error: names stored outside the code.

Pickled local models name their classes' modules, queued Celery messages name their tasks, Job rows name
their kinds, and backups name their models by app label. Each is pinned here against data written before
the move (at 74991ea), so a later move that forgets one fails a test instead of a deployment.
"""

from __future__ import annotations

import json
import tarfile
import zlib
from pathlib import Path

import pytest
from django.core.management import call_command

DATA = Path(__file__).parent / "data"
BEFORE = "74991ea"


def test_it_loads_a_local_model_pickled_before_the_move_and_scores_it_identically():
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


def test_it_registers_every_task_under_its_pinned_name():
    from config.celery import app

    app.loader.import_default_modules()
    ours = {name for name in app.tasks if name.startswith("annotate.")}
    assert ours == PINNED_TASKS


def test_it_keeps_the_job_kinds_stored_in_job_rows():
    from annotate.jobs.registry import HANDLERS

    assert set(HANDLERS) == {
        "recount", "suggest", "retrain", "audit", "import", "import_traces", "export_parquet", "bootstrap",
    }  # fmt: skip
