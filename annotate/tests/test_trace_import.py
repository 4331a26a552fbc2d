"""Trace imports from the published datasets in ../shared, read in place: Who&When and MAST."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotate.importers import ImportFileError
from annotate.models import Document, Episode, TraceStep
from annotate.services.traces import import_traces

SHARED = Path(settings.BASE_DIR).parent / "shared" / "datasets"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/datasets")
WHO = SHARED / "who_and_when"
MAST = SHARED / "mast" / "mad_human_sample.json"

pytestmark = pytest.mark.skipif(not WHO.is_dir(), reason="needs shared/datasets beside the repository")


def who_files():
    return sorted(WHO.rglob("*.json"))


def test_it_imports_all_20_who_and_when_logs_with_one_step_per_history_entry(study):
    result = import_traces(study=study, paths=[WHO], fmt="whowhen")
    assert (result.created, result.updated, result.unchanged, result.skipped) == (20, 0, 0, 0)
    docs = {d.external_id: d for d in Document.objects.filter(study=study, kind="trace")}
    assert len(docs) == 20
    for path in who_files():
        data = json.loads(path.read_text())
        doc = next(
            d
            for d in docs.values()
            if d.meta["question_id"] == data["question_ID"]
            and d.meta["subset"] == ("hand-crafted" if "Hand" in str(path) else "algorithm-generated")
        )
        steps = list(TraceStep.objects.filter(document=doc).order_by("index"))
        assert len(steps) == len(data["history"]) == doc.meta["trace"]["steps"]
        assert [s.index for s in steps] == list(range(len(steps)))
        first = data["history"][0]["content"].replace("\r\n", "\n").replace("\x00", "")
        assert (steps[0].output or steps[0].input) == first
        episode = Episode.objects.get(document=doc)
        assert episode.reference["agent"] == data["mistake_agent"]
        assert episode.reference["step"] == int(data["mistake_step"])
        assert episode.reference["reason"] == data["mistake_reason"]
        assert episode.reference["source"] == "who&when"
        # The reference names an agent that speaks in the log, at a step that exists.
        assert 0 <= episode.reference["step"] < len(steps)


def test_it_reads_the_agent_from_name_or_from_the_role(study):
    import_traces(study=study, paths=[WHO], fmt="whowhen")
    hand = Document.objects.filter(study=study, meta__subset="hand-crafted")
    agents = set(TraceStep.objects.filter(document__in=hand).values_list("agent", flat=True))
    assert {"Orchestrator", "WebSurfer"} <= agents
    assert not any("(" in a for a in agents)
    assert TraceStep.objects.filter(document__in=hand, kind="handoff", name__startswith="→").exists()
    algo = Document.objects.filter(study=study, meta__subset="algorithm-generated")
    assert TraceStep.objects.filter(document__in=algo, agent="Computer_terminal", kind="tool_result").exists()
    call = TraceStep.objects.filter(document__in=algo, kind="tool_call").first()
    result = TraceStep.objects.get(document=call.document, index=call.paired_index)
    assert call.ran and result.paired_index == call.index


def test_reimporting_creates_and_writes_nothing(study, django_assert_max_num_queries):
    import_traces(study=study, paths=[WHO], fmt="whowhen")
    import_traces(study=study, paths=[MAST], fmt="mast")
    before = (Document.objects.count(), TraceStep.objects.count(), Episode.objects.count())
    ids = list(TraceStep.objects.order_by("pk").values_list("pk", flat=True)[:5])
    again = import_traces(study=study, paths=[WHO], fmt="whowhen")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 20)
    mast = import_traces(study=study, paths=[MAST], fmt="mast")
    assert (mast.created, mast.updated, mast.unchanged) == (0, 0, 4)
    assert (Document.objects.count(), TraceStep.objects.count(), Episode.objects.count()) == before
    assert list(TraceStep.objects.order_by("pk").values_list("pk", flat=True)[:5]) == ids


def test_it_imports_the_mast_sample_in_all_three_trace_shapes(study):
    result = import_traces(study=study, paths=[MAST], fmt="mast")
    assert result.created == 4
    records = json.loads(MAST.read_text())
    for record in records:
        doc = Document.objects.get(
            study=study,
            kind="trace",
            external_id__endswith=f":{record['trace_id']}",
            cluster=record["mas_name"],
            meta__round=record["round"],
        )
        steps = TraceStep.objects.filter(document=doc)
        trace = record["trace"]
        try:
            parsed = json.loads(trace)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and "trajectory" in parsed:
            assert steps.count() == len(parsed["trajectory"])
        else:
            assert steps.count() > 1  # a MetaGPT log is split at each agent's turn
            assert steps.exclude(agent="").count() >= steps.count() - 1
        modes = Episode.objects.get(document=doc).reference["failure_modes"]
        expected = [
            a["failure mode"].split("\n")[0].strip()
            for a in record["annotations"]
            if any(v is True for k, v in a.items() if k.startswith("annotator"))
        ]
        assert [m["mode"] for m in modes] == expected


def test_the_command_imports_folders_and_names_a_bad_record(study, tmp_path, capsys):
    call_command("import_traces", "--study", study.slug, "--format", "whowhen", str(WHO / "Hand-Crafted"))
    assert "10 created" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"history": [{"content": "hi", "role": "user"}], "mistake_step": "seven"}))
    with pytest.raises(CommandError, match="mistake_step must be a whole number"):
        call_command(
            "import_traces", "--study", study.slug, "--format", "whowhen", str(WHO / "Algorithm-Generated"), str(bad)
        )
    # One transaction: the good files before the bad one were not kept.
    assert Document.objects.filter(study=study, meta__subset="algorithm-generated").count() == 0


def test_a_malformed_file_names_the_record_and_writes_nothing(study, tmp_path):
    bad = tmp_path / "logs.json"
    bad.write_text(json.dumps([{"history": [{"content": "a", "role": "user"}]}, {"history": "nope"}]))
    with pytest.raises(ImportFileError, match="record 2"):
        import_traces(study=study, paths=[bad], fmt="whowhen")
    assert not Document.objects.filter(study=study).exists()
