"""The codebook version page: the mapping table pre-filled from the diff, preview, move, revert, owners only;
and the coding and adjudication pages showing the old type of a coding queued again."""

from __future__ import annotations

import pytest

from annotate.coding.adjudication import AdjudicationValues, adjudication_save
from annotate.coding.services import CodingValues, coding_save
from annotate.models import CodebookMigration, Coding, Study
from annotate.tests.factories.codebook_revision import revised_codebook


@pytest.fixture
def coded(study, make_episode, codes, alice, bob):
    def values(code):
        return CodingValues(
            failure_type=codes.type(code), source=codes.source("agent_design"),
            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
        )  # fmt: skip

    episodes = {}
    for title, (a, b) in {"rename": ("SPC-01", "SPC-01"), "merge": ("PLN-02", "PLN-01"),
                          "split": ("TUS-03", "TUS-03"), "retired": ("CTL-01", "EXT-04")}.items():  # fmt: skip
        ep = episodes[title] = make_episode(study, title=title)
        coding_save(episode=ep, coder=alice, values=values(a), version=None)
        coding_save(episode=ep, coder=bob, values=values(b), version=None)
    return episodes


def _form(page, **override):
    """The posted form as the page pre-filled it."""
    data = {"to": str(page.context["target"].pk)}
    for row in page.context["rows"]:
        data[f"map-{row.code}"] = ", ".join(row.targets)
        if row.retired:
            data[f"retired-{row.code}"] = "on"
    data.update(override)
    return {k: v for k, v in data.items() if v is not None}


def test_it_prefills_the_mapping_from_the_codebook_diff(client, alice, study, codebook, coded):
    target = revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    assert page.status_code == 200 and page.context["target"] == target
    rows = {r.code: r for r in page.context["rows"]}
    assert [r.change for r in page.context["rows"][:3]] == ["removed"] * 3  # removed types come first
    assert rows["SPC-01"].targets == ("SPC-11",)  # a rename: the added type with the same name
    assert rows["PLN-02"].targets == () and not rows["PLN-02"].retired and rows["PLN-02"].used == 1
    assert rows["TUS-03"].targets == ("TUS-03",) and rows["TUS-03"].used == 2
    assert rows["EXT-04"].change == "same"
    assert b'aria-invalid="true"' in page.content  # PLN-02 and CTL-01 still need a decision
    json_map = client.get(f"/studies/alpha/settings/codebook/?to={target.pk}&format=json").json()
    assert json_map["types"]["SPC-01"] == "SPC-11" and json_map["types"]["PLN-02"] == "?"


def test_it_refuses_an_incomplete_table_and_moves_nothing(client, alice, study, codebook, coded):
    revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    response = client.post("/studies/alpha/settings/codebook/", _form(page, action="migrate"))
    assert response.status_code == 400
    problems = response.context["problems"]
    assert "PLN-02: give the new code(s), or tick retired" in problems
    assert "CTL-01: give the new code(s), or tick retired" in problems
    response = client.post(
        "/studies/alpha/settings/codebook/",
        _form(page, action="migrate", **{"map-PLN-02": "PLN-01", "retired-CTL-01": "on", "map-SPC-01": "SPC-77"}),
    )
    assert response.status_code == 400
    assert "types.SPC-01: no type 'SPC-77' in agentic-failures@1.1" in response.context["problems"]
    assert not CodebookMigration.objects.exists()
    assert Study.objects.get(pk=study.pk).codebook_id == codebook.pk


def test_it_previews_then_moves_then_reverts(client, alice, study, codebook, coded):
    target = revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    form = _form(page, **{"map-PLN-02": "PLN-01", "retired-CTL-01": "on", "map-TUS-03": "TUS-03, TUS-09"})
    preview = client.post("/studies/alpha/settings/codebook/", {**form, "action": "preview"})
    assert preview.status_code == 200
    assert (3, "codings queued again for their coder (split or retired type)") in preview.context["preview"]
    assert not CodebookMigration.objects.exists()
    assert Study.objects.get(pk=study.pk).codebook_id == codebook.pk

    moved = client.post("/studies/alpha/settings/codebook/", {**form, "action": "migrate"}, follow=True)
    assert "Moved the codings to agentic-failures@1.1" in moved.content.decode()
    assert Study.objects.get(pk=study.pk).codebook_id == target.pk
    migration = CodebookMigration.objects.get()
    assert migration.counts["requeued"] == 3 and migration.counts["moved"] == 3

    reverted = client.post(f"/studies/alpha/settings/codebook/{migration.pk}/revert/", follow=True)
    assert "Reverted: the study is back on agentic-failures@1.0" in reverted.content.decode()
    assert Study.objects.get(pk=study.pk).codebook_id == codebook.pk
    assert not Coding.objects.filter(recode_from__isnull=False).exists()


def test_only_owners_reach_the_page_or_revert(client, alice, bob, vera, charlie, study, codebook, coded):
    revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    form = _form(page, action="migrate", **{"map-PLN-02": "PLN-01", "retired-CTL-01": "on"})
    for user, status in ((bob, 403), (vera, 403), (charlie, 404)):
        client.force_login(user)
        assert client.get("/studies/alpha/settings/codebook/").status_code == status
        assert client.post("/studies/alpha/settings/codebook/", form).status_code == status
    assert not CodebookMigration.objects.exists()
    client.force_login(alice)
    client.post("/studies/alpha/settings/codebook/", form)
    migration = CodebookMigration.objects.get()
    client.force_login(bob)
    assert client.post(f"/studies/alpha/settings/codebook/{migration.pk}/revert/").status_code == 403
    assert CodebookMigration.objects.get().reverted_at is None


def test_the_coding_page_shows_the_old_type_of_a_coding_queued_again(client, alice, bob, study, codebook, coded, codes):
    revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    client.post(
        "/studies/alpha/settings/codebook/",
        _form(
            page, action="migrate", **{"map-PLN-02": "PLN-01", "retired-CTL-01": "on", "map-TUS-03": "TUS-03,TUS-09"}
        ),
    )
    client.force_login(bob)
    nxt = client.post("/studies/alpha/next/")
    assert nxt.status_code == 302 and nxt.url.endswith(f"/episodes/{coded['split'].pk}/code/")
    html = client.get(nxt.url).content.decode()
    assert "Choose the type again" in html
    assert "<code>TUS-03</code>" in html and "<code>TUS-09</code>" in html and "was split into" in html
    # Blinding is unchanged: Bob had coded the episode, so he sees Alice's coding as before.
    other = client.get(f"/studies/alpha/episodes/{coded['retired'].pk}/code/").content.decode()
    assert "Choose the type again" not in other  # Bob's EXT-04 was kept
    client.force_login(alice)
    retired = client.get(f"/studies/alpha/episodes/{coded['retired'].pk}/code/").content.decode()
    assert "was retired" in retired and "<code>CTL-01</code>" in retired


def test_the_adjudication_list_shows_adjudications_to_decide_again(client, alice, study, codebook, coded, codes):
    adjudication_save(
        episode=coded["retired"], adjudicator=alice,
        values=AdjudicationValues(
            failure_type=codes.type("CTL-01"), source=codes.source("agent_design"),
            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"), rationale="r",
        ),
    )  # fmt: skip
    revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    client.post(
        "/studies/alpha/settings/codebook/",
        _form(page, action="migrate", **{"map-PLN-02": "PLN-01", "retired-CTL-01": "on"}),
    )
    listing = client.get("/studies/alpha/adjudicate/").content.decode()
    assert "1 adjudication to decide again" in listing and "<code>CTL-01</code>" in listing
    detail = client.get(f"/studies/alpha/episodes/{coded['retired'].pk}/adjudicate/").content.decode()
    assert "The adjudicated type was <code>CTL-01</code>" in detail


def test_a_large_study_moves_in_a_job_with_progress(
    client, alice, study, codebook, coded, eager_jobs, monkeypatch, django_capture_on_commit_callbacks
):
    from annotate.models import Job
    from annotate.views import codebook_moves as page_module

    monkeypatch.setattr(page_module, "INLINE_LIMIT", 3)  # the fixture's 8 codings count as a large study
    target = revised_codebook(codebook)
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/codebook/")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/studies/alpha/settings/codebook/",
            _form(page, action="migrate", **{"map-PLN-02": "PLN-01", "retired-CTL-01": "on"}),
        )
    job = Job.objects.get(kind="codebook_migration")
    assert response.status_code == 302 and response.url == f"/jobs/{job.pk}/"
    assert job.status == "success", job.error
    assert job.result["counts"]["requeued"] == 1
    from django.db import connection

    if connection.vendor == "sqlite":  # PostgreSQL writes progress from its own connection, outside this test's
        assert (job.done, job.total) == (8, 8)  # transaction, so the row it updates is not there to see
    assert Study.objects.get(pk=study.pk).codebook_id == target.pk
    assert CodebookMigration.objects.get().pk == job.result["migration"]
