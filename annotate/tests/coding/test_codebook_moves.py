"""Moving a study's codings to a revised codebook: a rename, a merge, a split and a retired type; counts, history,
the queue, per-version agreement, the export's two type columns, and the revert."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied

from annotate.analysis.coders import agreement_document
from annotate.coding.adjudication import AdjudicationValues, adjudication_save
from annotate.coding.codebook_maps import MapError, codebook_map_validate
from annotate.coding.codebook_moves import (
    RevertRefused,
    codebook_migration_revert,
    codings_migrate,
    readjudications,
)
from annotate.coding.labels import Reason, final_labels
from annotate.coding.queue import episode_next
from annotate.coding.services import CodingValues, coding_save
from annotate.exports.rows import csv_chunks, export_rows
from annotate.models import Adjudication, CodebookMigration, Coding, Study
from annotate.tests.factories.codebook_revision import MAP, revised_codebook
from taxonomy.models import FailureType

SNAPSHOT = ("failure_type_id", "source_id", "stage_id", "capability_id", "recode_from_id", "failure_type_original",
            "not_a_failure", "needs_new_type")  # fmt: skip


@pytest.fixture
def code(codes):
    def make(episode, coder, type_code, **kw):
        if type_code is None:
            values = CodingValues(not_a_failure=True, not_a_failure_reason="a feature request")
        else:
            values = CodingValues(
                failure_type=codes.type(type_code), source=codes.source("agent_design"),
                stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"), **kw,
            )  # fmt: skip
        return coding_save(episode=episode, coder=coder, values=values, version=None)

    return make


@pytest.fixture
def coded(study, make_episode, code, codes, alice, bob):
    """Six episodes coded by Alice and Bob (k = 2), one of them adjudicated."""
    pairs = {
        "rename": ("SPC-01", "SPC-01"),
        "merge": ("PLN-02", "PLN-01"),
        "split": ("TUS-03", "TUS-03"),
        "retired": ("CTL-01", "EXT-04"),
        "adjudicated": ("TUS-03", "EXT-04"),
        "not_a_failure": (None, None),
    }
    episodes = {}
    for title, (a, b) in pairs.items():
        ep = episodes[title] = make_episode(study, title=title)
        code(ep, alice, a)
        code(ep, bob, b)
    adjudication_save(
        episode=episodes["adjudicated"], adjudicator=alice,
        values=AdjudicationValues(
            failure_type=codes.type("TUS-03"), source=codes.source("agent_design"),
            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"), rationale="TUS fits",
        ),
    )  # fmt: skip
    return episodes


def _snapshot(study):
    rows = Coding.objects.filter(episode__study=study).order_by("pk").values_list("pk", *SNAPSHOT)
    adj = Adjudication.objects.filter(episode__study=study).order_by("pk").values_list("pk", *SNAPSHOT)
    return list(rows), list(adj)


def _migrate(study, target, user, raw=MAP):
    moves = codebook_map_validate(study=study, to_codebook=target, raw=raw)
    return codings_migrate(study=study, to_codebook=target, moves=moves, user=user)


def _type(coding):
    return coding.failure_type.code if coding.failure_type_id else None


def test_it_moves_one_to_one_codes_and_queues_split_and_retired_ones_again(study, codebook, coded, alice, bob):
    target = revised_codebook(codebook)
    migration = _migrate(study, target, alice)

    assert migration.counts == {
        "codings": 12, "moved": 3, "kept": 3, "requeued": 3, "held": 1, "without_type": 2,
        "adjudications_requeued": 1,
    }  # fmt: skip
    study.refresh_from_db()
    assert study.codebook_id == target.pk
    by = {(c.episode.document.title, c.coder.username): c for c in Coding.objects.filter(episode__study=study)}
    assert (_type(by["rename", "alice"]), by["rename", "alice"].failure_type_original) == ("SPC-11", "SPC-01")
    assert _type(by["merge", "alice"]) == _type(by["merge", "bob"]) == "PLN-01"
    assert by["merge", "alice"].failure_type.codebook_id == target.pk
    assert by["merge", "alice"].source.codebook_id == target.pk
    for key in (("split", "alice"), ("split", "bob"), ("retired", "alice"), ("adjudicated", "alice")):
        assert by[key].failure_type_id is None
        assert by[key].recode_from.codebook_id == codebook.pk
    assert by["split", "alice"].recode_from.code == "TUS-03"
    assert by["retired", "alice"].recode_from.code == "CTL-01"
    assert _type(by["retired", "bob"]) == "EXT-04"
    adjudication = Adjudication.objects.get(episode=coded["adjudicated"])
    assert adjudication.failure_type_id is None and adjudication.recode_from.code == "TUS-03"


def test_it_records_each_change_in_the_codings_history_with_who_and_when(study, codebook, coded, alice):
    before = {c.pk: c.history.count() for c in Coding.objects.filter(episode__study=study)}
    migration = _migrate(study, revised_codebook(codebook), alice)
    for coding in Coding.objects.filter(episode__study=study):
        assert coding.history.count() == before[coding.pk] + 1
        latest = coding.history.first()
        assert latest.history_user == alice
        assert abs((latest.history_date - migration.created_at).total_seconds()) < 5
        assert "codebook migration agentic-failures@1.0 -> agentic-failures@1.1" in latest.history_change_reason
        assert latest.prev_record is not None
    rename = Coding.objects.get(episode=coded["rename"], coder__username="alice")
    delta = rename.history.first().diff_against(rename.history.first().prev_record)
    assert {c.field for c in delta.changes} >= {"failure_type", "source", "failure_type_original", "version"}
    assert Adjudication.objects.get(episode=coded["adjudicated"]).history.first().history_user == alice


def test_it_queues_the_codings_again_for_their_coders_and_the_adjudication_for_the_adjudicator(
    study, codebook, coded, alice, bob, client
):
    _migrate(study, revised_codebook(codebook), alice)
    study.refresh_from_db()
    assert episode_next(study=study, coder=bob) == coded["split"]
    assert episode_next(study=study, coder=alice) == coded["split"]  # then "retired"; never "adjudicated"
    assert episode_next(study=study, coder=alice, skipped=[coded["split"].pk]) == coded["retired"]
    labels = {e.document.title: label for e, label in final_labels(study)}
    assert labels["split"].reason == Reason.RECODE
    assert labels["adjudicated"].reason == Reason.READJUDICATE
    assert labels["merge"].usable and labels["rename"].usable

    new = FailureType.objects.get(codebook=study.codebook, code="TUS-09")
    mine = Coding.objects.get(episode=coded["split"], coder=bob)
    values = CodingValues(failure_type=new, source=mine.source, stage=mine.stage, capability=mine.capability)
    coding_save(episode=coded["split"], coder=bob, values=values, version=mine.version)
    mine.refresh_from_db()
    assert mine.recode_from_id is None and mine.failure_type_original == "TUS-03"
    assert episode_next(study=study, coder=bob) is None  # Bob's "retired" coding (EXT-04) was kept


def test_it_computes_agreement_per_codebook_version(study, codebook, coded, alice):
    _migrate(study, revised_codebook(codebook), alice)
    study = Study.objects.get(pk=study.pk)
    now = agreement_document(study, bootstrap=200)
    then = agreement_document(study, bootstrap=200, version="agentic-failures@1.0")
    assert now["parameters"]["codebook"] == "agentic-failures@1.1"
    assert then["parameters"]["codebook"] == "agentic-failures@1.0"
    assert now["parameters"]["codebook_versions"] == ["agentic-failures@1.1", "agentic-failures@1.0"]
    ft_now = next(a for a in now["axes"] if a["axis"] == "failure_type")
    ft_then = next(a for a in then["axes"] if a["axis"] == "failure_type")
    # 1.0: rename, split and not-a-failure agree; merge, retired and adjudicated do not: 3 of 6.
    assert ft_then["n_episodes"] == 6 and ft_then["percent_agreement"]["value"] == pytest.approx(0.5)
    # 1.1: the merge now agrees; the split and the other re-queued codings are left out until coded again.
    assert ft_now["n_episodes"] == 3 and ft_now["percent_agreement"]["value"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="never used"):
        agreement_document(study, bootstrap=200, version="9.9")


def test_it_exports_the_original_and_the_migrated_type(study, codebook, coded, alice):
    _migrate(study, revised_codebook(codebook), alice)
    study = Study.objects.get(pk=study.pk)
    rows = {r["title"]: r for r in export_rows(study)}
    (rename,) = {(c["failure_type"], c["failure_type_original"]) for c in rows["rename"]["codings"]}
    assert rename == ("SPC-11", "SPC-01")
    split = rows["split"]["codings"][0]
    assert (split["failure_type"], split["failure_type_original"]) == (None, "TUS-03")
    assert rows["split"]["label_reason"] == Reason.RECODE
    pairs = sorted((c["failure_type"] or "", c["failure_type_original"]) for c in rows["retired"]["codings"])
    assert pairs == [("", "CTL-01"), ("EXT-04", "EXT-04")]
    text = b"".join(csv_chunks(export_rows(study), slots=2)).decode()
    header = text.splitlines()[0]
    assert '"coder1_failure_type","coder1_failure_type_original"' in header
    assert '"SPC-11","SPC-01"' in text


def test_it_reverts_to_the_earlier_state_exactly_and_keeps_that_in_history(study, codebook, coded, alice, bob):
    start = _snapshot(study)
    n_history = sum(c.history.count() for c in Coding.objects.filter(episode__study=study))
    migration = _migrate(study, revised_codebook(codebook), alice)
    study.refresh_from_db()
    mine = Coding.objects.get(episode=coded["split"], coder=bob)
    new = FailureType.objects.get(codebook=study.codebook, code="TUS-09")
    coding_save(
        episode=coded["split"], coder=bob, version=mine.version,
        values=CodingValues(failure_type=new, source=mine.source, stage=mine.stage, capability=mine.capability),
    )  # fmt: skip

    result = codebook_migration_revert(migration=migration, user=alice)

    assert result == {"restored": 13, "edited_since": 1}
    assert _snapshot(study) == start
    study.refresh_from_db()
    assert study.codebook_id == codebook.pk
    migration.refresh_from_db()
    assert migration.reverted_by == alice and migration.reverted_at is not None
    # One record for the move, one for Bob's re-coding, one for the revert: nothing is lost.
    assert sum(c.history.count() for c in Coding.objects.filter(episode__study=study)) == n_history + 12 + 1 + 12
    assert mine.history.filter(failure_type=new).exists()
    assert "revert of codebook migration" in mine.history.first().history_change_reason
    with pytest.raises(RevertRefused, match="already reverted"):
        codebook_migration_revert(migration=migration, user=alice)


def test_it_refuses_a_revert_once_codings_were_made_under_the_new_version(
    study, codebook, coded, alice, bob, make_episode, codes
):
    migration = _migrate(study, revised_codebook(codebook), alice)
    study = Study.objects.get(pk=study.pk)
    fresh = make_episode(study, title="fresh")
    target = study.codebook
    values = CodingValues(
        failure_type=FailureType.objects.get(codebook=target, code="TUS-09"),
        source=target.axis_values.get(axis="source", code="llm"),
        stage=target.axis_values.get(axis="stage", code="iterative_execution"),
        capability=target.axis_values.get(axis="capability", code="actuation"),
    )
    coding_save(episode=fresh, coder=bob, values=values, version=None)
    before = _snapshot(study)
    with pytest.raises(RevertRefused, match="1 coding"):
        codebook_migration_revert(migration=migration, user=alice)
    assert _snapshot(study) == before


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"types": {"NOPE-01": "SPC-11"}}, "types.NOPE-01: no type 'NOPE-01' in agentic-failures@1.0"),
        ({"types": {**MAP["types"], "SPC-01": "SPC-99"}}, "types.SPC-01: no type 'SPC-99' in agentic-failures@1.1"),
        ({"types": {"SPC-01": "SPC-11"}}, "type 'PLN-02' (1 coding(s)) is not in agentic-failures@1.1"),
        ({"types": {**MAP["types"], "CTL-01": 3}}, "types.CTL-01: must be a code, a list of codes"),
        ({"types": MAP["types"], "from": "other@2"}, "'from' is 'other@2'"),
        ({"types": MAP["types"], "extra": 1}, "unknown field(s) extra"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_it_refuses_a_bad_map_naming_the_problem_and_writes_nothing(study, codebook, coded, alice, raw, problem):
    target = revised_codebook(codebook)
    before = _snapshot(study)
    with pytest.raises(MapError) as exc:
        codebook_map_validate(study=study, to_codebook=target, raw=raw)
    assert any(problem in p for p in exc.value.problems), exc.value.problems
    assert _snapshot(study) == before and not CodebookMigration.objects.exists()


def test_it_refuses_a_draft_target_or_the_current_codebook(study, codebook, coded):
    draft = revised_codebook(codebook, version="1.2", publish=False)
    with pytest.raises(MapError, match="is a draft"):
        codebook_map_validate(study=study, to_codebook=draft, raw=MAP)
    with pytest.raises(MapError, match="already uses"):
        codebook_map_validate(study=study, to_codebook=codebook, raw={})


def test_it_lets_only_owners_migrate_or_revert(study, codebook, coded, alice, bob, vera, charlie):
    target = revised_codebook(codebook)
    moves = codebook_map_validate(study=study, to_codebook=target, raw=MAP)
    before = _snapshot(study)
    for user in (bob, vera, charlie):
        with pytest.raises(PermissionDenied):
            codings_migrate(study=study, to_codebook=target, moves=moves, user=user)
    assert _snapshot(study) == before
    migration = codings_migrate(study=study, to_codebook=target, moves=moves, user=alice)
    with pytest.raises(PermissionDenied):
        codebook_migration_revert(migration=migration, user=bob)


def test_it_writes_nothing_when_the_move_fails_halfway(study, codebook, coded, alice, monkeypatch):
    from annotate.coding import codebook_moves

    target = revised_codebook(codebook)
    moves = codebook_map_validate(study=study, to_codebook=target, raw=MAP)
    before = _snapshot(study)
    calls = {"n": 0}
    real = codebook_moves._write

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # codings written, adjudications not
            raise RuntimeError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(codebook_moves, "_write", failing)
    with pytest.raises(RuntimeError):
        codings_migrate(study=study, to_codebook=target, moves=moves, user=alice)
    assert _snapshot(study) == before
    assert Study.objects.get(pk=study.pk).codebook_id == codebook.pk
    assert not CodebookMigration.objects.exists()


def test_it_accepts_a_map_file_through_the_command(study, codebook, coded, alice, tmp_path):
    from io import StringIO

    from django.core.management import CommandError, call_command

    revised_codebook(codebook)
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"from": "agentic-failures@1.0", **MAP}))
    bad = tmp_path / "bad.json"
    bad.write_text('{"types": {"SPC-01": "SPC-99"}}')
    with pytest.raises(CommandError, match="no type 'SPC-99'"):
        call_command("migrate_codings", study="alpha", to="agentic-failures@1.1", map=str(bad), stdout=StringIO())
    out = StringIO()
    call_command("migrate_codings", study="alpha", to="agentic-failures@1.1", map=str(path), dry_run=True, stdout=out)
    assert "dry run" in out.getvalue() and "requeued 3" in out.getvalue()
    assert Study.objects.get(pk=study.pk).codebook_id == codebook.pk
    out = StringIO()
    call_command("migrate_codings", study="alpha", to="agentic-failures@1.1", map=str(path), stdout=out)
    assert "moved 3" in out.getvalue() and "requeued 3" in out.getvalue()
    call_command("migrate_codings", study="alpha", revert=True, stdout=out)
    assert "reverted migration" in out.getvalue()
    assert Study.objects.get(pk=study.pk).codebook_id == codebook.pk


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_of_a_migrated_study_loads_back_with_its_queued_codings(study, codebook, coded, alice, tmp_path, fmt):
    from annotate.exports.datasets import dataset_import, export_write

    _migrate(study, revised_codebook(codebook), alice)
    study = Study.objects.get(pk=study.pk)
    out = tmp_path / f"alpha.{fmt}"
    export_write(study=study, fmt=fmt, out=out)
    loaded = dataset_import(path=out, slug="beta", owner=alice)
    again = tmp_path / f"beta.{fmt}"
    export_write(study=Study.objects.get(pk=loaded.study.pk), fmt=fmt, out=again)
    # Exported again, the loaded study gives the same rows (its own episode ids and slug aside).
    assert _export_rows(again, loaded.study.slug) == _export_rows(out, study.slug)

    def state(s):
        rows = Coding.objects.filter(episode__study=s).select_related(
            "failure_type", "recode_from", "episode__document"
        )
        return sorted(
            (c.episode.document.external_id, c.failure_type.code if c.failure_type else "",
             c.recode_from.code if c.recode_from else "", c.failure_type_original or _type(c) or "")
            for c in rows
        )  # fmt: skip

    assert state(loaded.study) == state(study)
    assert ("acme/agent#3", "", "TUS-03", "TUS-03") in state(loaded.study)
    queued = Coding.objects.filter(episode__study=loaded.study, recode_from__isnull=False)
    assert queued.count() == 4 and {c.recode_from.codebook_id for c in queued} == {codebook.pk}
    # The adjudication whose type (TUS-03) was split loads still awaiting a new decision, with the earlier
    # decision on it: the old type (of the earlier version), its axes and rationale; not as a final label.
    pending = Adjudication.objects.get(episode__study=loaded.study)
    assert (pending.failure_type_id, pending.recode_from.code, pending.recode_from.codebook_id) == (
        None, "TUS-03", codebook.pk
    )  # fmt: skip
    assert pending.failure_type_original == "TUS-03" and pending.rationale == "TUS fits"
    assert pending.stage.code == "iterative_execution" and pending.stage.codebook_id == loaded.study.codebook_id
    assert [a.pk for a in readjudications(loaded.study)] == [pending.pk]
    # Its history reads as the exported study's: the earlier decision first, then waiting after the move.
    first, last = pending.history.order_by("history_date", "history_id")
    assert (first.failure_type.code, first.failure_type.codebook_id, first.recode_from_id) == ("TUS-03", codebook.pk,
                                                                                               None)  # fmt: skip
    assert (last.history_type, last.failure_type_id, last.recode_from_id) == ("~", None, pending.recode_from_id)
    assert "before a codebook migration" in first.history_change_reason and "awaiting" in last.history_change_reason
    labels = {e.document.title: label.reason for e, label in final_labels(loaded.study)}
    assert labels["adjudicated"] == Reason.READJUDICATE and labels["split"] == Reason.RECODE
    # The queued codings are offered to their coders again (the study is marked as recoding).
    assert Study.objects.get(pk=loaded.study.pk).recoding


def _export_rows(path, slug):
    from annotate.exports.datasets import dataset_rows

    rows = []
    for row in dataset_rows(path):
        row.pop("episode_id", None)  # the CSV reader leaves it out
        assert row.pop("study") == slug
        rows.append(row)
    return rows


def test_the_queue_stops_looking_for_queued_codings_once_all_are_coded_again(study, codebook, coded, alice, bob):
    _migrate(study, revised_codebook(codebook), alice)
    study = Study.objects.get(pk=study.pk)
    assert study.recoding
    target = study.codebook
    for coding in Coding.objects.filter(episode__study=study, recode_from__isnull=False).exclude(
        episode=coded["adjudicated"]
    ):
        values = CodingValues(
            failure_type=FailureType.objects.get(codebook=target, code="TUS-09"),
            source=coding.source, stage=coding.stage, capability=coding.capability,
        )  # fmt: skip
        coding_save(episode=coding.episode, coder=coding.coder, values=values, version=coding.version)
    # Alice's coding on the adjudicated episode still waits, for the adjudicator's decision: not the queue's.
    assert episode_next(study=study, coder=bob) is None
    assert not Study.objects.get(pk=study.pk).recoding


def test_the_preview_counts_what_the_move_then_does_and_writes_nothing(study, codebook, coded, alice):
    from annotate.coding.codebook_moves import codings_move_preview

    target = revised_codebook(codebook)
    moves = codebook_map_validate(study=study, to_codebook=target, raw=MAP)
    before = _snapshot(study)
    preview = codings_move_preview(study=study, to_codebook=target, moves=moves)
    assert _snapshot(study) == before and not CodebookMigration.objects.exists()
    assert preview == codings_migrate(study=study, to_codebook=target, moves=moves, user=alice).counts


def test_a_waiting_adjudication_without_its_earlier_type_is_refused(study, codebook, coded, alice, tmp_path):
    """An export made before adjudication_failure_type_original was written cannot say what the waiting
    adjudication decided: refused, naming the column and the row, and nothing written."""
    from django.core.exceptions import ValidationError

    from annotate.exports.datasets import dataset_import, export_write

    _migrate(study, revised_codebook(codebook), alice)
    out = tmp_path / "alpha.jsonl"
    export_write(study=Study.objects.get(pk=study.pk), fmt="jsonl", out=out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        row.pop("adjudication_failure_type_original")
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValidationError) as caught:
        dataset_import(path=old, slug="beta", owner=alice, coders_per_episode=2)
    [message] = caught.value.message_dict["adjudication_failure_type_original"]
    assert "awaits a new decision" in message and "(acme/agent#" in message
    assert not Study.objects.filter(slug="beta").exists()
