"""Trace imports from the published datasets in ../shared, read in place: Who&When and MAST."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotate.imports.parsed import ImportFileError
from annotate.models import Document, Episode, TraceStep
from annotate.traces.services import import_traces

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


def test_it_keeps_the_content_hashes_of_earlier_imports():
    """The stored content hash and steps digest of a log never change between versions: a log imported before
    is still "unchanged" when imported again (these values were stored by the first trace importer)."""
    from annotate.imports.records import record_hash
    from annotate.traces.parsers import iter_trace_records

    expected = {
        "Algorithm-Generated/1.json": (
            "cd64ceef076e28fe7a1b837cdbf837f57e173fc0babe255878015ef864b1438a",
            "708530757edb9ab8cf12b2930c0f67bdba559e4f83d15694a798a052c423d498",
        ),
        "Hand-Crafted/8.json": (
            "e10f68d970a7352abddd43f38aae1f448a02ac47b8cb53c77495e07bb3c4174b",
            "1b36ddf7cb1d8f84f324cee037faccb2514e37441702eedda92c745685e8bfa6",
        ),
    }
    for name, (content_hash, steps_sha256) in expected.items():
        (tr,) = iter_trace_records(WHO / name, "whowhen")
        assert (record_hash(tr.record), tr.record.meta["steps_sha256"]) == (content_hash, steps_sha256)


def test_a_trace_repeated_in_a_later_batch_keeps_the_steps_of_the_copy_imported(study, tmp_path, monkeypatch):
    from annotate.tests.factories.trace_fixtures import otlp_trace
    from annotate.traces import services as service

    first, second = otlp_trace(), otlp_trace()
    for span in second["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["name"] = "renamed " + span["name"]
    (tmp_path / "1.json").write_text(json.dumps(first))
    (tmp_path / "2.json").write_text(json.dumps(second))
    monkeypatch.setattr(service, "BATCH", 1)  # the repeat arrives in a batch of its own
    result = import_traces(study=study, paths=[tmp_path], fmt="otlp")
    assert (result.created, result.skipped) == (1, 1)
    doc = Document.objects.get(study=study, kind="trace")
    names = list(TraceStep.objects.filter(document=doc).values_list("name", flat=True))
    assert names and not any(n.startswith("renamed") for n in names)
    assert "renamed" not in doc.body


def test_it_reports_progress_per_file_and_stops_its_parser_when_a_write_fails(study, tmp_path, monkeypatch):
    import threading

    from annotate.traces import services as service

    seen = []
    import_traces(study=study, paths=[WHO / "Algorithm-Generated"], fmt="whowhen", progress=lambda n, t: seen.append(n))
    assert seen == list(range(1, 11))

    def broken(*args, **kwargs):
        raise ImportFileError("the database went away")

    monkeypatch.setattr(service, "BATCH", 2)
    monkeypatch.setattr(service, "_write", broken)
    with pytest.raises(ImportFileError, match="went away"):
        import_traces(study=study, paths=[WHO], fmt="whowhen")
    assert not any(t.name == "trace-parse" for t in threading.enumerate())


def test_a_bad_record_after_many_good_ones_is_named_and_nothing_is_kept(study, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    good = json.loads((WHO / "Algorithm-Generated" / "1.json").read_text())
    for n in range(450):  # past two batches: the parser runs ahead of the writer
        (logs / f"{n:04d}.json").write_text(json.dumps({**good, "question_ID": f"q{n}"}))
    (logs / "0300.json").write_text(json.dumps({**good, "history": [{"role": "user"}]}))
    with pytest.raises(ImportFileError, match=r"0300\.json: history\[0\] has no content"):
        import_traces(study=study, paths=[logs], fmt="whowhen")
    assert not Document.objects.filter(study=study).exists()


def test_a_corrected_reference_is_stored_on_reimport_though_the_log_is_unchanged(study, tmp_path):
    data = json.loads((WHO / "Algorithm-Generated" / "1.json").read_text())
    path = tmp_path / "log.json"
    path.write_text(json.dumps(data))
    import_traces(study=study, paths=[path], fmt="whowhen")
    path.write_text(json.dumps({**data, "mistake_step": "3", "mistake_reason": "corrected"}))
    again = import_traces(study=study, paths=[path], fmt="whowhen")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 1)
    reference = Episode.objects.get(study=study).reference
    assert (reference["step"], reference["reason"], reference["agent"]) == (3, "corrected", data["mistake_agent"])


def test_a_trace_another_import_wrote_meanwhile_gives_a_clear_error_and_writes_nothing(study, monkeypatch):
    from lib.db.copy import RawWriter

    insert = RawWriter.insert

    def racing(self, rows, **kwargs):
        if self.model is Document:  # another import commits the same trace between our SELECT and INSERT
            Document.objects.create(study=study, kind="trace", external_id=rows[0]["external_id"], cluster="x")
        return insert(self, rows, **kwargs)

    monkeypatch.setattr(RawWriter, "insert", racing)
    with pytest.raises(ImportFileError, match="another import wrote some of these traces at the same time"):
        import_traces(study=study, paths=[WHO / "Algorithm-Generated"], fmt="whowhen")
    assert not Document.objects.filter(study=study).exists()
