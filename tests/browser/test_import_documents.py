"""In a real browser: upload a file and watch the import job, browse documents, split one into episodes."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from annotate.models import Document, Episode

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"


@pytest.fixture
def media(settings, tmp_path, monkeypatch):
    """Uploads go to a temporary MEDIA_ROOT, and jobs run in the server's process (no worker here)."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def test_an_owner_uploads_issues_and_sees_the_job_finish(page, live_server, login, shot, study, alice, media):
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/")
    shot("import-form")
    page.get_by_label("File to import").set_input_files(str(SAMPLES / "github_issues.json"))
    page.get_by_role("button", name="Import", exact=True).click()
    job = page.locator(".job")
    expect(job.locator(".badge")).to_have_text("Succeeded", timeout=20_000)
    expect(job.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    expect(job).to_contain_text("58")  # created
    shot("import-job-done")
    assert Document.objects.filter(study=study).count() == 58

    # A broken file: the job fails and names the record; nothing more is written.
    page.get_by_label("File to import").set_input_files(str(SAMPLES / "bad" / "wrong_types.json"))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".job .error")).to_contain_text("record 2, line 63 (openloop/loopkit#446)")
    shot("import-job-failed")
    assert Document.objects.filter(study=study).count() == 58


def test_the_browser_refuses_a_file_over_the_limit(page, live_server, login, study, alice, media, settings):
    settings.FAULTLINE_MAX_UPLOAD_MB = 1
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/")
    page.get_by_label("File to import").set_input_files(str(SAMPLES / "bad" / "huge_body.json"))
    expect(page.locator("#import-error")).to_contain_text("uploads are limited to 1 MB")
    page.get_by_role("button", name="Import", exact=True).click()
    assert not Document.objects.exists()


def test_an_owner_browses_documents_and_splits_one(page, live_server, login, shot, study, alice, media):
    from annotate.imports.services import import_file

    import_file(study=study, path=SAMPLES / "github_issues.json")
    import_file(study=study, path=SAMPLES / "literature.bib")
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/")
    page.get_by_role("link", name="Documents").click()
    expect(page.locator("#documents")).to_contain_text("82 documents")
    shot("documents-list")
    page.get_by_label("Search").fill("AzureChat")
    expect(page).to_have_url(re.compile(r"q=AzureChat"))  # the search is in the address, so it can be shared
    expect(page.locator("#documents")).to_contain_text("Documents matching “AzureChat”")
    expect(page.locator("#documents tbody tr")).to_have_count(1)
    page.get_by_label("Kind").select_option("literature")
    expect(page.locator("#documents")).to_contain_text("No documents match")
    page.get_by_label("Kind").select_option("")
    shot("documents-search")
    page.get_by_role("link", name=re.compile("AzureChat gets 401")).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("AzureChat gets 401")
    expect(page.locator(".doc-body pre code")).to_contain_text("401 Unauthorized")
    shot("document-page")

    # Select one sentence of the plain-text view, as a mouse would, and add it as an episode.
    sentence = "Nothing ever looks at `expires_on`."
    page.locator("#doc-source").evaluate(
        """(el, sentence) => {
            const node = el.firstChild, at = node.data.indexOf(sentence);
            const range = document.createRange();
            range.setStart(node, at); range.setEnd(node, at + sentence.length);
            const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
        }""",
        sentence,
    )
    expect(page.locator("#split-preview")).to_have_text(sentence)
    page.get_by_role("button", name="Add episode from selection").click()
    expect(page.locator("#episodes h2")).to_have_text("Episodes (2)")
    expect(page.locator("#episodes .excerpt")).to_contain_text("expires_on")
    doc = Document.objects.get(study=study, external_id="acme-agents/taskpilot#1378")
    episode = Episode.objects.get(document=doc, order=1)
    assert doc.body[episode.start : episode.end] == sentence == episode.excerpt

    page.locator(f"#episode-{episode.pk}").get_by_role("button", name="Mark hold-out").click()
    expect(page.locator(f"#episode-{episode.pk}")).to_contain_text("Hold-out")
    shot("document-split")
    episode.refresh_from_db()
    assert episode.split == "holdout"


def test_leaving_the_search_box_asks_nothing_again_and_a_result_link_works_at_once(
    page, live_server, login, study, alice, media
):
    """The search box's "change" on leaving it repeated the request its typing had made; the same list,
    swapped in under the pointer, ate the click that left the box. The list page asks only for what it
    does not show already; Filter (submit) still asks."""
    from annotate.imports.services import import_file

    import_file(study=study, path=SAMPLES / "github_issues.json")
    login("alice")
    asked = []
    page.on("request", lambda r: asked.append(r.url) if r.headers.get("hx-request") else None)
    page.goto(f"{live_server.url}/studies/alpha/documents/")
    search = page.get_by_label("Search")
    search.fill("AzureChat")
    expect(page).to_have_url(re.compile(r"q=AzureChat"))
    expect(page.locator("#documents tbody tr")).to_have_count(1)
    search.blur()  # "change": the list already shows this
    page.get_by_label("Kind").select_option("github_issue")  # a change that asks
    expect(page).to_have_url(re.compile(r"kind=github_issue"))
    expect(page.locator("#documents tbody tr")).to_have_count(1)
    page.get_by_label("Kind").select_option("")
    expect(page).to_have_url(re.compile(r"kind=&"))
    assert [re.search(r"kind=[^&]*", url).group(0) for url in asked] == ["kind=", "kind=github_issue", "kind="]
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true"):
        page.get_by_role("button", name="Filter").click()  # asked for: asks again
    assert len(asked) == 4, asked
    search.fill("Unauthorized AzureChat")  # typing, then straight to the result: one click
    expect(page).to_have_url(re.compile(r"q=Unauthorized"))
    page.get_by_role("link", name=re.compile("AzureChat gets 401")).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("AzureChat gets 401")
    assert len(asked) == 5, asked


def test_clearing_the_box_during_a_slow_search_shows_every_document(page, live_server, login, study, alice, media):
    """While a search is out the address still shows the old list; the request made meanwhile (the box
    cleared, which the address already shows) is queued by htmx and must run, not be dropped."""
    from annotate.imports.services import import_file

    import_file(study=study, path=SAMPLES / "github_issues.json")
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/documents/")
    expect(page.locator("#documents")).to_contain_text("58 documents")
    held = []
    page.route(
        re.compile(r".*/documents/\?q=AzureChat.*"), lambda route: held.append(route)
    )  # the search's answer waits
    page.evaluate("""() => { window.confirms = 0;
        document.addEventListener("htmx:confirm", () => { window.confirms += 1; }); }""")
    search = page.get_by_label("Search")
    search.fill("AzureChat")
    page.wait_for_function("() => window.confirms === 1")
    page.wait_for_function("() => document.querySelector('form.filters').classList.contains('htmx-request')")
    search.fill("")
    page.wait_for_function("() => window.confirms === 2")  # asked while the search is out
    with page.expect_response(re.compile(r".*q=AzureChat.*")):
        held[0].continue_()
    # Settled: the search's answer swapped in, and whatever was queued behind it answered too.
    page.wait_for_function("() => !document.querySelector('form.filters').classList.contains('htmx-request')")
    expect(page).not_to_have_url(re.compile(r"q=AzureChat"))
    expect(page.locator("#documents")).to_contain_text("58 documents")
    expect(search).to_have_value("")


def test_a_viewer_sees_the_document_without_split_controls(page, live_server, login, study, vera, media):
    from annotate.imports.services import import_file

    import_file(study=study, path=SAMPLES / "github_issues.json")
    doc = Document.objects.get(study=study, external_id="acme-agents/taskpilot#1315")
    login("vera")
    page.goto(f"{live_server.url}/studies/alpha/documents/{doc.pk}/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    assert page.locator("#doc-source").count() == 0
    assert page.get_by_role("button", name="Mark hold-out").count() == 0
    assert page.locator(".doc-body script").count() == 0


def test_a_two_megabyte_body_is_shown_in_part(page, live_server, login, shot, study, alice, media):
    from annotate.imports.services import import_file

    import_file(study=study, path=SAMPLES / "bad" / "huge_body.json")
    doc = Document.objects.get(study=study)
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/documents/{doc.pk}/")
    expect(page.get_by_role("note")).to_contain_text("2,000,214 characters long; the first 100,000 are shown")
    expect(page.locator(".doc-body pre code")).to_contain_text("search_docs")
    shot("huge-body")
