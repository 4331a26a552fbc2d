"""The first day under `make run`: the printed owner may create a study, a user who may not is told exactly how
to get the right, pages speak in display names rather than codes, and the episode page links its document."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotate.models import Episode, Job, JobStatus, Study
from conftest import PASSWORD
from taxonomy.models import AxisValue

# Text inside these is quoted data (codes shown as codes, imported text, form values), not the page's own words.
QUOTED = {"code", "pre", "script", "style", "textarea", "kbd", "option", "select"}


class _Text(HTMLParser):
    """A page's own visible words: text outside QUOTED elements and outside rendered imported text."""

    VOID = {"br", "hr", "img", "input", "link", "meta", "source", "wbr", "col", "area", "base", "embed", "track"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []  # whether each open element quotes
        self.words: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        self.stack.append(tag in QUOTED or "rendered" in classes or "episode-text" in classes)

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not any(self.stack):
            self.words.append(data)


def page_words(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.words).split())


def test_the_instrument_finds_a_code_in_words_but_not_in_code_or_imported_text():
    html = '<p>By kind: github_issue 3</p><p><code>llm</code></p><div class="rendered"><p>tool_service</p></div>'
    assert page_words(html) == "By kind: github_issue 3"
    assert "tool_service" not in page_words(html)


@pytest.fixture
def demo(codebook, client, eager_jobs):
    from django.contrib.auth import get_user_model

    call_command("demo", stdout=io.StringIO())
    owner = get_user_model().objects.get(username="demo-owner")
    owner.set_password(PASSWORD)
    owner.save()
    client.force_login(owner)
    return owner


def test_the_owner_make_run_prints_is_staff_and_may_create_a_study(codebook, client, capsys, eager_jobs):
    from django.contrib.auth import get_user_model

    call_command("demo")
    out = capsys.readouterr().out
    assert re.search(r"owner\s+demo-owner\s+password: \S+\s+\(staff: may create studies\)", out)
    owner = get_user_model().objects.get(username="demo-owner")
    assert owner.is_staff and not owner.is_superuser
    assert not get_user_model().objects.get(username="demo-coder1").is_staff
    client.force_login(owner)
    page = client.get(reverse("study_list")).content.decode()
    assert f'href="{reverse("study_new")}"' in page and "New study" in page
    assert client.get(reverse("study_new")).status_code == 200


def test_a_user_who_may_not_create_studies_is_told_exactly_how_to_get_the_right(client, bob, settings):
    settings.FAULTLINE_STUDY_CREATORS = "staff"
    client.force_login(bob)
    words = page_words(client.get(reverse("study_list")).content.decode())
    assert "New study" not in words
    assert "Only staff users may create studies on this server" in words
    assert "FAULTLINE_STUDY_CREATORS=any" in client.get(reverse("study_list")).content.decode()
    assert "Staff status" in words and "bob" in words
    refused = client.get(reverse("study_new"))
    assert refused.status_code == 403
    assert "Staff status" in refused.content.decode()


def test_with_creators_any_the_study_list_offers_new_study_to_everyone(client, bob, settings):
    settings.FAULTLINE_STUDY_CREATORS = "any"
    client.force_login(bob)
    words = page_words(client.get(reverse("study_list")).content.decode())
    assert "New study" in words and "Only staff" not in words


def _codes_in_words(study) -> set[str]:
    """Every code a page must not show as a word: axis values, document kinds, axis and flag names."""
    codes = set(AxisValue.objects.filter(codebook=study.codebook).values_list("code", flat=True))
    codes |= {"github_issue", "failure_type", "not_a_failure", "needs_new_type", "tool_result", "tool_call"}
    codes |= {"import_traces", "export_parquet", "Import_traces", "Export_parquet"}  # job kinds
    return {c for c in codes if "_" in c}  # one-word codes ("llm") read as words; these do not


def test_study_pages_speak_in_display_names_not_codes(demo, client):
    from annotate.suggestions.services import suggestions_make

    study = Study.objects.get(slug="demo")
    suggestions_make(study=study, backend="local")
    for kind in ("import_traces", "export_parquet", "suggest", "bootstrap"):  # the Jobs page names each kind
        Job.objects.create(kind=kind, study=study, created_by=demo, status=JobStatus.SUCCESS)
    job = Job.objects.create(kind="import_traces", study=study, created_by=demo)
    episode = Episode.objects.filter(study=study, n_codings=2).select_related("document").order_by("pk").first()
    uncoded = Episode.objects.filter(study=study, n_codings=0).order_by("pk").first()
    slug = study.slug
    urls = [
        reverse("study_overview", args=[slug]),
        reverse("document_list", args=[slug]),
        reverse("document_detail", args=[slug, episode.document_id]),
        reverse("episode_detail", args=[slug, episode.pk]),
        reverse("adjudication_list", args=[slug]),
        reverse("adjudication_page", args=[slug, episode.pk]),
        reverse("analysis_page", args=[slug]),
        reverse("agreement_page", args=[slug]),
        reverse("coverage_page", args=[slug]),
        reverse("suggestion_quality_page", args=[slug]),
        reverse("triage_board", args=[slug]),
        reverse("study_job_list", args=[slug]),
        reverse("study_members", args=[slug]),
        reverse("job_status", args=[job.pk]),
        reverse("coding_page", args=[slug, uncoded.pk]),
        reverse("codebook_list"),
    ]
    codes = _codes_in_words(study)
    found = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        words = page_words(response.content.decode())
        shown = sorted(c for c in codes if re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", words))
        if shown:
            found[url] = shown
    assert not found, found
    # The codebook's own prose quotes codes (its rules say "code source agent_design when…"): there only the
    # typical codes of each type must read as names.
    codebook = client.get(reverse("codebook_detail", args=[study.codebook_id])).content.decode()
    tags = re.findall(r'<span class="tag">(source|stage|capability): ([^<]+)</span>', codebook)
    assert len(tags) > 65 and ("source", "LLM / model behaviour") in tags
    every_code = set(AxisValue.objects.filter(codebook=study.codebook).values_list("code", flat=True))
    assert not [(axis, name) for axis, name in tags if name in every_code], tags
    jobs = page_words(client.get(reverse("study_job_list", args=[slug])).content.decode())
    assert "Trace import #" in jobs and "Parquet export #" in jobs and "Analysis #" in jobs
    overview = page_words(client.get(reverse("study_overview", args=[slug])).content.decode())
    assert re.search(r"By kind: GitHub issue 58 · Literature record 24", overview)


def test_the_episode_page_breadcrumb_links_its_document(demo, client):
    episode = Episode.objects.filter(study__slug="demo").select_related("document").order_by("pk").first()
    html = client.get(reverse("episode_detail", args=["demo", episode.pk])).content.decode()
    crumbs = re.search(r'<nav class="crumbs" aria-label="Breadcrumb">(.*?)</nav>', html, re.S).group(1)
    document_url = reverse("document_detail", args=["demo", episode.document_id])
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', crumbs)
    assert [url for url, _ in links] == [
        reverse("study_overview", args=["demo"]), reverse("document_list", args=["demo"]), document_url,
    ]  # fmt: skip
    assert links[2][1].strip().startswith(episode.document.title[:30])
    assert crumbs.rstrip().endswith(f"Episode {episode.pk}")
    assert client.get(document_url).status_code == 200
