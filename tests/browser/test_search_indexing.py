"""In a real browser (PostgreSQL): right after an import the search page says how many documents are still being
indexed, at 1366 and 390 px; once the search_index job ran, it finds them."""

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from annotate.documents.search import search_pending
from annotate.imports.services import import_file
from annotate.jobs.runner import job_run
from annotate.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"


def test_the_search_page_says_what_is_still_being_indexed(page, live_server, login, shot, study, alice,
                                                         require_postgres, monkeypatch):  # fmt: skip
    monkeypatch.setattr("annotate.jobs.runner.job_enqueue", lambda *, job_id: False)  # no worker: the job waits
    import_file(study=study, path=SAMPLES / "github_issues.json")
    assert search_pending(study.pk) == 58
    login("alice")
    for width in (1366, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/studies/alpha/documents/?q=timeout")
        expect(page.get_by_role("status")).to_contain_text("Still indexing 58 documents for search")
        shot(f"search-indexing-{width}")
    job_run(job_id=Job.objects.get(study=study, kind="search_index").pk)
    page.reload()
    expect(page.get_by_text("Still indexing")).to_have_count(0)
    expect(page.locator("mark").first).to_be_visible()
    shot("search-indexed-390")


def test_the_search_page_says_when_failed_indexing_is_tried_again(page, live_server, login, shot, study, alice,
                                                                  require_postgres, monkeypatch):  # fmt: skip
    from annotate.documents import handlers

    monkeypatch.setattr("annotate.jobs.runner.job_enqueue", lambda *, job_id: False)
    import_file(study=study, path=SAMPLES / "github_issues.json")
    with monkeypatch.context() as broken:
        broken.setattr(handlers, "search_vectors_fill", lambda **kwargs: 1 / 0)
        assert job_run(job_id=Job.objects.get(study=study, kind="search_index").pk).status == "failed"
    login("alice")
    for width in (1366, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/studies/alpha/documents/?q=timeout")
        status = page.get_by_role("status")
        expect(status).to_contain_text("Indexing 58 documents for search failed")
        expect(status).to_contain_text("tried again automatically at about")
        shot(f"search-indexing-failed-{width}")
