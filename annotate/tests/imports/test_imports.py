"""File imports through the real parsers: the samples, idempotence, atomicity, the broken files."""

import json
from pathlib import Path

import hypothesis
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from hypothesis import given
from hypothesis import strategies as st

from annotate.coding.services import CodingValues, coding_save
from annotate.imports.parsed import ImportFileError
from annotate.imports.services import import_file
from annotate.models import Coding, Document, Episode

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"
BAD = SAMPLES / "bad"


def counts(result):
    return (result.created, result.updated, result.unchanged, result.skipped)


def test_it_imports_the_sample_issues_into_14_clusters(study):
    result = import_file(study=study, path=SAMPLES / "github_issues.json")
    assert counts(result) == (58, 0, 0, 2)
    assert dict(result.skip_reasons) == {"pull request": 2}
    docs = Document.objects.filter(study=study, kind="github_issue")
    assert docs.count() == 58
    assert docs.values("cluster").distinct().count() == 14
    assert docs.filter(cluster="acme-agents/taskpilot").count() == 15
    assert Episode.objects.filter(study=study).count() == 58
    assert not Episode.objects.filter(study=study, queue_key=0).exists()
    doc = docs.get(external_id="acme-agents/taskpilot#1378")
    assert doc.url == "https://github.com/acme-agents/taskpilot/issues/1378"
    assert doc.labels == ",bug,providers,auth,"
    assert doc.meta["state"] == "closed" and doc.meta["author"] == "marisol-tech"
    assert "body" not in doc.raw and doc.raw["node_id"]


def test_a_second_import_creates_nothing(study):
    import_file(study=study, path=SAMPLES / "github_issues.json")
    again = import_file(study=study, path=SAMPLES / "github_issues.json")
    assert counts(again) == (0, 0, 58, 2)
    assert Document.objects.filter(study=study).count() == 58


def test_include_prs_adds_the_two_pull_requests_to_existing_clusters(study):
    result = import_file(study=study, path=SAMPLES / "github_issues.json", include_prs=True)
    assert counts(result) == (60, 0, 0, 0)
    prs = Document.objects.filter(study=study, meta__pull_request=True)
    assert sorted(prs.values_list("url", flat=True)) == [
        "https://github.com/acme-agents/taskpilot/pull/1209",
        "https://github.com/openloop/loopkit/pull/452",
    ]
    assert Document.objects.filter(study=study).values("cluster").distinct().count() == 14


def test_a_changed_issue_is_updated_and_keeps_its_episodes_and_codings(study, bob, codes, tmp_path):
    items = json.loads((SAMPLES / "github_issues.json").read_text())
    import_file(study=study, path=SAMPLES / "github_issues.json")
    doc = Document.objects.get(study=study, external_id="acme-agents/taskpilot#1378")
    episode = doc.episodes.get()
    values = CodingValues(
        failure_type=codes.type("TUS-03"),
        source=codes.source("llm"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )
    coding_save(episode=episode, coder=bob, values=values, version=None)
    items[0]["body"] += "\n\nUpdate: still broken on 2.1."
    items[0]["updated_at"] = "2025-11-01T00:00:00Z"
    changed = tmp_path / "issues.json"
    changed.write_text(json.dumps(items))
    result = import_file(study=study, path=changed)
    assert counts(result) == (0, 1, 57, 2)
    doc.refresh_from_db()
    assert doc.body.endswith("still broken on 2.1.")
    assert list(doc.episodes.values_list("pk", flat=True)) == [episode.pk]
    assert Coding.objects.filter(episode=episode, coder=bob).exists()


def test_literature_from_all_three_formats_is_the_same_record(study):
    bib = import_file(study=study, path=SAMPLES / "literature.bib")
    assert counts(bib) == (24, 0, 0, 0)
    assert counts(import_file(study=study, path=SAMPLES / "literature.csv")) == (0, 0, 24, 0)
    assert counts(import_file(study=study, path=SAMPLES / "literature.ris")) == (0, 0, 6, 0)
    docs = Document.objects.filter(study=study, kind="literature")
    assert docs.count() == 24
    assert docs.values("cluster").distinct().count() == 24
    doc = docs.get(external_id="yao2024taubench_policy")
    assert doc.title.startswith("τ-bench: A Benchmark")
    assert doc.cluster == "yao2024taubench_policy"
    assert doc.meta["year"] == 2024 and doc.meta["venue"]
    assert doc.meta["doi"] == "10.48550/arXiv.2406.12045"
    assert doc.meta["abstract"] and doc.body != doc.meta["abstract"]  # the failure description is the body


def test_the_ris_body_is_the_failure_description(study):
    import_file(study=study, path=SAMPLES / "literature.ris")
    doc = Document.objects.get(study=study, external_id="cemri2025mast_fm33")
    assert doc.body.startswith("A verifier agent in a software-building team")
    assert doc.meta["abstract"].startswith("Builds a taxonomy")
    assert doc.meta["venue"] == "arXiv preprint arXiv:2503.13657"


def test_a_csv_with_only_a_title_column_imports_with_stable_ids(study, tmp_path):
    path = tmp_path / "titles.csv"
    path.write_text("title,abstract\nAgents loop forever,They do.\nTools time out,Often.\n")
    assert counts(import_file(study=study, path=path)) == (2, 0, 0, 0)
    assert counts(import_file(study=study, path=path)) == (0, 0, 2, 0)
    assert Document.objects.get(title="Tools time out").body == "Often."


def test_gh_issue_list_json_and_json_lines_are_accepted(study, tmp_path):
    gh = [
        {
            "number": 5,
            "title": "Planner hallucinates a tool",
            "body": "It calls `search_v2`, which does not exist.",
            "labels": [{"id": "LA_1", "name": "bug", "description": "", "color": "d73a4a"}],
            "url": "https://github.com/openloop/loopkit/issues/5",
            "state": "OPEN",
            "createdAt": "2025-03-01T09:00:00Z",
            "author": {"id": "U_1", "is_bot": False, "login": "dana", "name": "Dana"},
        }
    ]
    (tmp_path / "gh.json").write_text(json.dumps(gh))
    assert counts(import_file(study=study, path=tmp_path / "gh.json")) == (1, 0, 0, 0)
    doc = Document.objects.get(study=study, external_id="openloop/loopkit#5")
    assert (doc.cluster, doc.meta["state"], doc.meta["author"]) == ("openloop/loopkit", "open", "dana")
    rest = json.loads((SAMPLES / "github_issues.json").read_text())[:3]
    lines = tmp_path / "issues.jsonl"
    lines.write_text("\n".join(json.dumps(item) for item in [*rest, *gh]) + "\n")
    assert counts(import_file(study=study, path=lines)) == (3, 0, 1, 0)


def test_a_repository_field_names_the_repository(study, tmp_path):
    item = {"number": 9, "title": "x", "body": "y", "repository": {"nameWithOwner": "kitebox/kite-rag"}}
    (tmp_path / "a.json").write_text(json.dumps([item]))
    import_file(study=study, path=tmp_path / "a.json")
    doc = Document.objects.get(study=study)
    assert (doc.external_id, doc.url) == ("kitebox/kite-rag#9", "https://github.com/kitebox/kite-rag/issues/9")


def test_a_file_that_repeats_an_issue_imports_it_once(study, tmp_path):
    item = json.loads((SAMPLES / "github_issues.json").read_text())[0]
    (tmp_path / "dup.json").write_text(json.dumps([item, item]))
    result = import_file(study=study, path=tmp_path / "dup.json")
    assert counts(result) == (1, 0, 0, 1)
    assert dict(result.skip_reasons) == {"duplicate in this import": 1}


@pytest.mark.parametrize(
    "name, message",
    [
        ("truncated.json", r"record 3 \(starting on line 124\): invalid JSON: Unterminated string .*line 173"),
        ("wrong_types.json", r"record 2, line 63 \(openloop/loopkit#446\): 'title' must be a string.*'labels'"),
        ("not_issues.json", r"got a JSON object: it looks like a GitHub API error response \('Not Found'\)"),
        ("missing_title.csv", r"line 1: the CSV header has no 'title' column"),
        ("broken.bib", r"entry 'yao2024taubench_compound' starting on line 29.*gave up on line 41"),
    ],
)
def test_a_broken_file_names_the_record_and_writes_nothing(study, name, message):
    import_file(study=study, path=SAMPLES / "literature.csv")
    before = list(Document.objects.order_by("pk").values_list("pk", "content_hash"))
    with pytest.raises(ImportFileError, match=message):
        import_file(study=study, path=BAD / name)
    assert list(Document.objects.order_by("pk").values_list("pk", "content_hash")) == before
    assert Episode.objects.count() == 24


def test_the_huge_body_is_stored_whole(study):
    result = import_file(study=study, path=BAD / "huge_body.json")
    assert counts(result) == (1, 0, 0, 0)
    doc = Document.objects.get(study=study)
    assert doc.external_id == "acme-agents/taskpilot#1399"
    assert len(doc.body) == 2_000_214


def test_a_bad_record_late_in_a_big_file_rolls_back_the_earlier_batches(study, tmp_path):
    items = [
        {"number": n, "title": f"t{n}", "body": "b", "repository_url": "https://api.github.com/repos/a/b"}
        for n in range(1, 2502)
    ]
    items[2400]["title"] = None
    (tmp_path / "big.json").write_text(json.dumps(items))
    with pytest.raises(ImportFileError, match=r"record 2401, line 1 \(a/b#2401\): 'title' must be a string"):
        import_file(study=study, path=tmp_path / "big.json")
    assert not Document.objects.exists() and not Episode.objects.exists()


def test_it_writes_in_batches_not_row_by_row(study, tmp_path, django_assert_max_num_queries):
    items = [
        {"number": n, "title": f"t{n}", "body": "b", "repository_url": "https://api.github.com/repos/a/b"}
        for n in range(1, 2001)
    ]
    (tmp_path / "many.json").write_text(json.dumps(items))
    # Per batch of 1,000: a SELECT, then multi-row INSERTs and UPDATEs (SQLite caps a statement
    # at 999 parameters, so Django splits them further there): far from one query per row.
    with django_assert_max_num_queries(100):
        assert import_file(study=study, path=tmp_path / "many.json").created == 2000
    with django_assert_max_num_queries(5):  # whether the study has documents, then a SELECT per batch
        assert import_file(study=study, path=tmp_path / "many.json").unchanged == 2000


def test_progress_reaches_the_exact_total(study):
    calls = []
    import_file(study=study, path=SAMPLES / "github_issues.json", progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (60, 60)
    assert all(d <= t for d, t in calls)


def test_an_unknown_extension_with_unrecognisable_content_is_refused(study, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(ImportFileError, match="cannot tell the format"):
        import_file(study=study, path=path)


def test_the_commands_report_counts_and_fail_on_bad_input(study, capsys):
    call_command("import_github", "--study", "alpha", "--file", str(SAMPLES / "github_issues.json"))
    assert "58 created, 0 updated, 0 unchanged, 2 skipped (2 pull request)" in capsys.readouterr().out
    call_command("import_github", "--study", "alpha", "--file", str(SAMPLES / "github_issues.json"))
    assert "0 created, 0 updated, 58 unchanged" in capsys.readouterr().out
    call_command("import_literature", "--study", "alpha", str(SAMPLES / "literature.bib"))
    assert "24 created" in capsys.readouterr().out
    with pytest.raises(CommandError, match=r"truncated\.json: record 3.*nothing was imported"):
        call_command("import_github", "--study", "alpha", "--file", str(BAD / "truncated.json"))
    with pytest.raises(CommandError, match=r"missing_title\.csv: line 1"):
        call_command("import_literature", "--study", "alpha", str(BAD / "missing_title.csv"))
    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("import_literature", "--study", "nope", str(SAMPLES / "literature.bib"))
    assert Document.objects.count() == 82


def _record_hash_as_first_written(record):
    """record_hash as it was first written (the stored content hashes were made with it)."""
    import hashlib

    from annotate.imports.records import HASH_IGNORED_META

    meta = {k: v for k, v in record.meta.items() if k not in HASH_IGNORED_META}
    payload = json.dumps(
        [record.url, record.cluster, record.title, record.body, record.labels, meta],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def test_the_content_hash_is_the_one_stored_by_earlier_imports():
    from datetime import UTC, datetime

    from annotate.imports.parsed import Record
    from annotate.imports.records import record_hash

    bodies = ["", "plain", 'quotes " and \\ back', "tabs\tand\nnewlines\r\x00\x01\x1f\x7f", "ünïcödé ✓ 🙂 \u2028",
              "a lone \ud800 surrogate", "x" * 100_000]  # fmt: skip
    for n, body in enumerate(bodies):
        record = Record(
            kind="trace",
            external_id=f"e{n}",
            cluster="c/\u00e9",
            title=f"T {body[:20]}",
            body=body,
            url="https://example.org/?a=1&b=2",
            labels=["bug", "ü"],
            meta={"z": 1, "a": [1.5, None, True], "format": "x", "when": datetime(2026, 1, 1, tzinfo=UTC), "s": body},
        )
        assert record_hash(record) == _record_hash_as_first_written(record)


_META_VALUES = st.one_of(
    st.text(), st.integers(min_value=-(2**70), max_value=2**70), st.booleans(), st.none(),
    st.floats(allow_nan=True), st.lists(st.integers(), max_size=2), st.sampled_from(["a \ud800 b", "\udfff"]),
)  # fmt: skip


@hypothesis.settings(max_examples=400, deadline=None)
@given(
    meta=st.dictionaries(st.text(max_size=6), _META_VALUES, max_size=6),
    texts=st.lists(st.text(), min_size=4, max_size=4),
    labels=st.lists(st.text(max_size=8), max_size=3),
)
def test_the_fast_content_hash_writes_the_bytes_of_the_first(meta, texts, labels):
    """record_hash takes orjson for plain records (text, whole numbers, booleans) and json.dumps for the rest:
    both give the hash the stored documents carry, whatever the keys' order and characters."""
    from annotate.imports.parsed import Record
    from annotate.imports.records import record_hash

    url, cluster, title, body = texts
    record = Record("github_issue", "x/y#1", cluster, title, body, url, labels, meta, {})
    assert record_hash(record) == _record_hash_as_first_written(record)


def test_the_fast_content_hash_covers_the_usual_issue():
    from annotate.imports.parsers import github_record
    from annotate.imports.records import record_hash

    items = json.loads((SAMPLES / "github_issues.json").read_text())
    records = [github_record(item, n, include_prs=True) for n, item in enumerate(items, 1)]
    assert records
    for record in records:
        assert record_hash(record) == _record_hash_as_first_written(record)


def test_the_hash_fed_in_pieces_is_sha256_at_every_size_around_the_piece():
    """record_hash feeds sha256 pieces of under 2,048 bytes, so hashlib keeps the GIL: the digest must be the
    one of the whole, at every size around a piece's edges and for the usual 1-3 KB issue, through record_hash."""
    import hashlib
    import random

    from annotate.imports.parsed import Record
    from annotate.imports.records import _HASH_PIECE, _sha256_hex, record_hash

    rng = random.Random(5)
    sizes = [0, 1, _HASH_PIECE - 1, _HASH_PIECE, _HASH_PIECE + 1, 2 * _HASH_PIECE, 2 * _HASH_PIECE + 1, 3000, 65_536]
    for size in sizes:
        data = rng.randbytes(size)
        assert _sha256_hex(data) == hashlib.sha256(data).hexdigest(), size
    for size in (1000, 2046, 2047, 2048, 2049, 4100):
        record = Record("github_issue", "x/y#1", "x/y", "t", "é" * (size // 2), "u", ["bug"], {"n": 1}, {})
        assert record_hash(record) == _record_hash_as_first_written(record), size


def test_orjson_writes_a_string_as_json_dumps_does_for_every_code_point():
    import orjson

    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert orjson.dumps(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")


def test_every_character_a_field_can_hold_is_stored_as_given(study, tmp_path):
    # PostgreSQL takes new documents by COPY in its text format, which we write ourselves: backslashes,
    # tabs, newlines and \N must arrive as text, not as escapes or NULL.
    tricky = 'back\\slash \\N tab\there new\nline quote" nul-as-text \\u0000 café 😀 \u2028 end\\'
    item = {"number": 1, "title": tricky, "body": tricky, "repository_url": "https://api.github.com/repos/a/b",
            "labels": [{"name": "a\\b\tc"}], "extra": {"k\\t": [tricky, None, 1.5, True]}}  # fmt: skip
    (tmp_path / "tricky.json").write_text(json.dumps([item]))
    assert import_file(study=study, path=tmp_path / "tricky.json").created == 1
    doc = Document.objects.get(study=study)
    assert doc.title == tricky and doc.body == tricky
    assert doc.raw["extra"] == {"k\\t": [tricky, None, 1.5, True]} and doc.labels == ",a\\b\tc,"
    assert import_file(study=study, path=tmp_path / "tricky.json").unchanged == 1


def test_new_episodes_have_their_place_in_the_random_order(study):
    from annotate.studies.services import queue_key_for

    import_file(study=study, path=SAMPLES / "github_issues.json")
    episodes = list(Episode.objects.filter(study=study).select_related("document"))
    assert len(episodes) == 58 and all(e.document.study_id == study.pk for e in episodes)
    assert all(e.queue_key == queue_key_for(study, e.pk) for e in episodes)
    assert len({e.document_id for e in episodes}) == 58


def test_prefetched_yields_every_item_then_the_producers_error_and_stops_early():
    import threading

    from lib.db.prefetch import prefetched

    assert list(prefetched(iter(range(1234)), chunk=100)) == list(range(1234))

    def failing():
        yield from range(250)
        raise ImportFileError("record 251: bad")

    got = []
    with pytest.raises(ImportFileError, match="record 251"):
        for item in prefetched(failing(), chunk=100):
            got.append(item)
    assert got == list(range(250))
    before = threading.active_count()
    stream = prefetched(iter(range(10**9)), chunk=10, ahead=2)
    assert next(stream) == 0
    stream.close()  # the writer failed: the producer must stop, not parse the rest
    assert threading.active_count() == before


def test_prefetched_closes_its_source_in_the_producers_thread():
    """A source's `finally` (the export's reader closes its own database connection there) runs in the thread that
    ran the source, whether the consumer stopped early or read it all, and before closing the stream returns."""
    import threading

    from lib.db.prefetch import prefetched

    closed_in = []

    def source(n):
        try:
            yield from range(n)
        finally:
            closed_in.append(threading.current_thread().name)

    stream = prefetched(source(10**9), chunk=10, ahead=1, name="producer")
    assert next(stream) == 0
    stream.close()
    assert closed_in == ["producer"]
    assert list(prefetched(source(25), chunk=10, name="producer")) == list(range(25))
    assert closed_in == ["producer", "producer"]


def test_an_import_into_an_empty_study_never_looks_for_existing_documents(study, tmp_path, monkeypatch):
    from annotate.imports import records as imports

    lookups = []
    real = imports._existing
    monkeypatch.setattr(imports, "_existing", lambda *a, **k: lookups.append(1) or real(*a, **k))
    items = [{"number": n, "title": f"t{n}", "repository_url": "https://api.github.com/repos/a/b"} for n in range(2500)]
    items.append(dict(items[3], title="repeated"))  # a duplicate in the file is still skipped
    (tmp_path / "many.json").write_text(json.dumps(items))
    result = import_file(study=study, path=tmp_path / "many.json")
    assert (result.created, result.skipped, lookups) == (2500, 1, [])
    assert Document.objects.get(study=study, external_id="a/b#3").title == "t3"
    result = import_file(study=study, path=tmp_path / "many.json")  # now it has documents: look them up
    assert (result.created, result.unchanged, len(lookups)) == (0, 2500, 3)


FIELDS = ["kind", "external_id", "cluster", "title", "body", "url", "labels", "meta", "raw", "content_hash"]


@pytest.mark.parametrize("name", ["github_issues.json", "literature.bib", "literature.ris", "literature.csv", "tricky"])
def test_the_spooled_import_stores_exactly_what_the_direct_one_does(study, other_study, tmp_path, name):
    """A job reads its file once into a spool and writes from it: every field, hash and count must come out
    as from the file itself, including what orjson cannot write (an integer over 64 bits)."""
    from annotate.imports.services import import_file_resumable, spool_path_for

    if name == "tricky":
        tricky = 'back\\slash \\N tab\there new\nline "q" café 😀 \u2028 end\\'
        items = [
            {"number": 1, "title": tricky, "body": tricky, "repository_url": "https://api.github.com/repos/a/b",
             "labels": [{"name": "a\\b\tc"}], "extra": {"k\\t": [tricky, None, 1.5, True, 2**70]}},
            {"number": 2, "title": "plain", "repository_url": "https://api.github.com/repos/a/b", "body": None},
            {"number": 2, "title": "again", "repository_url": "https://api.github.com/repos/a/b"},
        ]  # fmt: skip
        path = tmp_path / "tricky.json"
        path.write_text(json.dumps(items))
    else:
        path = tmp_path / name
        path.write_bytes((SAMPLES / name).read_bytes())
    direct = import_file(study=study, path=path)
    spooled = import_file_resumable(study=other_study, path=path)
    assert spooled.as_dict() == direct.as_dict()
    assert not spool_path_for(path).exists()

    def stored(s):
        return sorted(Document.objects.filter(study=s).values_list(*FIELDS), key=lambda row: row[1])

    assert stored(other_study) == stored(study)
    assert Episode.objects.filter(study=other_study).count() == direct.created


@pytest.mark.django_db(transaction=True)
def test_new_ids_come_from_the_sequences_looked_up_once(require_postgres):
    """_ids_draw hands out (document id, episode id) pairs from the two tables' sequences. Its query looks the
    sequences up once (a materialised CTE): evaluated per row, that lookup cost ten times the nextval."""
    from django.db import connection

    from annotate.imports import records as imports

    pairs = imports._ids_draw(1_000)
    docs, episodes = zip(*pairs, strict=True)
    assert len(set(docs)) == len(set(episodes)) == 1_000
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence('annotate_document', 'id'))")
        assert cursor.fetchone()[0] > max(docs)
        cursor.execute("SELECT nextval(pg_get_serial_sequence('annotate_episode', 'id'))")
        assert cursor.fetchone()[0] > max(episodes)
        cursor.execute(
            "EXPLAIN (VERBOSE, FORMAT JSON) " + imports._IDS_SQL, ["annotate_document", "annotate_episode", 1_000]
        )
        plan = cursor.fetchone()[0][0]["Plan"]

    # Each row's nextval takes a sequence found once (in "CTE seq"), not one looked up per row.
    assert not any("pg_get_serial_sequence" in out for out in plan["Output"]), plan["Output"]
    assert [p["Subplan Name"] for p in plan["Plans"] if "Subplan Name" in p] == ["CTE seq"]


def test_raw_is_kept_as_json_text_on_postgresql_and_reads_back_whole(require_postgres, study):
    """Document.raw is `json`, not `jsonb` (a third of the server's parse cost per import): what the ORM
    saves and updates through Django's jsonb parameters, and what psycopg decodes itself, reads back whole."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'annotate_document' "
            "AND column_name IN ('raw', 'meta') ORDER BY column_name"
        )
        assert [row[0] for row in cursor.fetchall()] == ["jsonb", "json"]  # meta stays queryable
    value = {"b": 1, "a": [1, 2.5, None, "café 😀"], "big": 2**70}
    doc = Document.objects.create(study=study, kind="github_issue", external_id="a/b#1", cluster="a/b", raw=value)
    assert Document.objects.get(pk=doc.pk).raw == value
    doc.raw = {"trace": [{"span": 1}]}
    doc.save(update_fields=["raw"])
    assert Document.objects.get(pk=doc.pk).raw == {"trace": [{"span": 1}]}
    Document.objects.filter(pk=doc.pk).update(raw=[1, "x"])
    assert Document.objects.values_list("raw", flat=True).get(pk=doc.pk) == [1, "x"]


def test_binary_copy_stores_what_the_text_format_stores(require_postgres, study, other_study):
    """New documents and episodes go by COPY in PostgreSQL's binary format; the text format, which prepared rows
    still use, must store the same: escapes, NULLs, an Enum's value, jsonb from orjson and from json.dumps (an
    integer over 64 bits), the constants; and a broken row fails the batch as Django's IntegrityError."""
    from django.db import IntegrityError, connection, transaction
    from django.utils import timezone

    from annotate.models import DocumentKind
    from lib.db import copy as imports

    tricky = 'back\\slash \\N tab\there new\nline cr\rx "q" café 😀 \u2028 end\\'
    now = timezone.now()

    def rows(base: int) -> list[dict]:
        return [
            {"id": base + i, "kind": DocumentKind.GITHUB_ISSUE, "external_id": f"a/b#{i}", "url": "", "cluster": "a/b",
             "title": tricky, "body": body, "labels": ",a\\b\tc,", "meta": meta, "raw": raw, "content_hash": "h"}
            for i, (body, meta, raw) in enumerate([
                (tricky, {"n": 1, "t": tricky}, {"deep": [tricky, None, 1.5, True, {"k\\t": "v"}]}),
                ("", {}, {"big": 2**70, "neg": -(2**65)}),
                ("\\N", {"x": None}, []),
            ])
        ]  # fmt: skip

    def write(s, base: int, *, binary: bool) -> None:
        docs = imports.RawWriter(Document, {"study_id": s.pk, "imported_at": now, "updated_at": now}, with_pk=True)
        episodes = imports.RawWriter(Episode, {"study_id": s.pk, "created_at": now}, with_pk=True)
        assert docs.binary_types and episodes.binary_types  # both tables' column types have a binary form
        if not binary:
            docs.binary_types = episodes.binary_types = None
        docs.insert(rows(base))
        episodes.insert([{"id": base + i, "document_id": base + i, "queue_key": 2**62 + i} for i in range(3)])

    write(study, 10_000_000, binary=True)
    write(other_study, 20_000_000, binary=False)
    columns = [f.attname for f in Document._meta.concrete_fields if f.name not in {"id", "study"}]

    def stored(s) -> list[tuple]:
        with connection.cursor() as cursor:  # the generated full-text column, which the model does not declare
            sql = "SELECT search::text FROM annotate_document WHERE study_id = %s ORDER BY external_id"
            cursor.execute(sql, [s.pk])
            search = [row[0] for row in cursor.fetchall()]
        rows = list(Document.objects.filter(study=s).order_by("external_id").values_list(*columns))
        return list(zip(rows, search, strict=True))

    assert stored(study) == stored(other_study)
    first = Document.objects.get(study=study, external_id="a/b#0")
    assert first.kind == "github_issue" and first.title == first.body == tricky and first.labels == ",a\\b\tc,"
    assert Document.objects.get(study=study, external_id="a/b#1").raw == {"big": 2**70, "neg": -(2**65)}
    assert Document.objects.get(study=study, external_id="a/b#2").body == "\\N"
    assert first.imported_at == now and first.occurred_at is None and first.assignee_id is None
    ep_columns = ["document__external_id", "excerpt", "start", "end", "order", "split", "status", "n_codings",
                  "queue_key", "reference", "disagreement", "created_at"]  # fmt: skip
    expected = [(f"a/b#{i}", "", None, None, 0, "primary", "open", 0, 2**62 + i, {}, 0, now) for i in range(3)]

    def episodes(s) -> list[tuple]:
        return list(Episode.objects.filter(study=s).order_by("document__external_id").values_list(*ep_columns))

    assert episodes(study) == expected == episodes(other_study)

    with pytest.raises(IntegrityError), transaction.atomic():  # the same (study, kind, external_id) again
        imports.RawWriter(Document, {"study_id": study.pk}, with_pk=True).insert(rows(30_000_000)[:1])


def test_an_import_switches_threads_quickly_and_restores_the_interval(study, tmp_path, monkeypatch):
    """The parse waits for the GIL after every hash of a real-sized body; during an import a waiting
    thread gets it within 0.5 ms (Python's default is 5 ms), and the interval is put back after it."""
    import sys

    from annotate.imports import _threads, services

    before = sys.getswitchinterval()
    seen = []
    real = services._spool_write

    def spy(*args, **kwargs):
        seen.append(sys.getswitchinterval())
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "_spool_write", spy)
    path = tmp_path / "issues.json"
    path.write_bytes((SAMPLES / "github_issues.json").read_bytes())
    services.import_file_resumable(study=study, path=path)
    assert seen == [_threads.IMPORT_SWITCH_INTERVAL] < [before] and sys.getswitchinterval() == before
    path.write_bytes((BAD / "truncated.json").read_bytes())
    with pytest.raises(ImportFileError):
        services.import_file_resumable(study=study, path=path)
    assert seen[1:] == [_threads.IMPORT_SWITCH_INTERVAL] and sys.getswitchinterval() == before


def test_an_import_runs_the_garbage_collector_less_often_and_restores_it(study, tmp_path, monkeypatch):
    """The parse and the writes allocate a dozen containers a record; the collector's threshold is raised
    for the import (a sixth of its parse CPU at the default) and put back after it, even after an error."""
    import gc

    from annotate.imports import records, services

    before = gc.get_threshold()
    seen = []
    real = services._spool_write

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "_spool_write", spy)
    path = tmp_path / "issues.json"
    path.write_bytes((SAMPLES / "github_issues.json").read_bytes())
    services.import_file_resumable(study=study, path=path)
    assert seen == [records.IMPORT_GC_THRESHOLD] and gc.get_threshold() == before
    real_iter = services.iter_file

    def iter_spy(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        return real_iter(*args, **kwargs)

    monkeypatch.setattr(services, "iter_file", iter_spy)
    with pytest.raises(ImportFileError):
        services.import_file(study=study, path=BAD / "truncated.json")
    assert seen[1:] == [records.IMPORT_GC_THRESHOLD] and gc.get_threshold() == before
