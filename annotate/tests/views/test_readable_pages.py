"""Analysis, agreement and adjudication pages show display names, fit, and offer what a reader needs."""

from __future__ import annotations

import re

import pytest

from annotate.tests.coding.test_adjudication import cases, code  # noqa: F401 - fixtures
from annotate.tests.factories.analysis_factory import build, paper_rows


@pytest.fixture
def paper(study, codes, alice, bob):
    build(study, paper_rows(5, 6), codes, [alice, bob])
    return study


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_the_heatmaps_use_display_names_and_show_intervals_without_hover(paper, client, vera):
    client.force_login(vera)
    html = client.get("/studies/alpha/analysis/?bootstrap=200").content.decode()
    heatmaps = html[html.index('<table class="heatmap">') : html.index("Difference:")]
    assert "Iterative execution" in heatmaps and "Actuation (tool use &amp; action)" in heatmaps
    assert "iterative execution" not in heatmaps and ">actuation<" not in heatmaps
    assert 'id="show-intervals"' in html and 'class="iv">[' in heatmaps
    assert re.search('aria-label="Iterative execution \u00d7 [^"]+ episodes, [^"]*\\[', heatmaps)
    distributions = _text(html[html.index('id="dist-h"') :])
    assert "LLM / model behaviour" in distributions and " llm " not in distributions


def test_the_contrast_and_the_cell_page_name_the_cell_by_display_names(paper, client, vera):
    client.force_login(vera)
    panel = client.get("/studies/alpha/analysis/?bootstrap=200&cell=setup:memory", HTTP_HX_REQUEST="true")
    heading = re.search(r'<h2 id="sens-h">(.*?)</h2>', panel.content.decode()).group(1)
    assert heading == "Contrast: Setup &amp; initialization \u00d7 Memory &amp; context"
    assert re.search(r"most influential: [^(]+\((GitHub issue|Literature record), shift", panel.content.decode())
    cell = client.get("/studies/alpha/analysis/cell/literature/planning/reasoning/").content.decode()
    assert "<h1>Literature record: Planning &amp; decomposition \u00d7 Reasoning &amp; planning</h1>" in cell
    assert "<title>Planning &amp; decomposition \u00d7 Reasoning &amp; planning" in cell


def test_the_agreement_page_names_axes_and_values_without_raw_codes(paper, client, vera):
    client.force_login(vera)
    html = client.get("/studies/alpha/agreement/?bootstrap=200").content.decode()
    rows = re.findall(r'<th scope="row"><a href="\?axis=\w+#pairs-h">([^<]+)</a></th>', html)
    names = ["Failure type", "Category", "Responsibility source", "Workflow stage", "Agent capability", "Overall"]
    assert rows == names
    assert "<code>not_a_failure</code>" not in html
    stage = client.get("/studies/alpha/agreement/?bootstrap=200&axis=stage").content.decode()
    matrix = stage[stage.index('class="table confusion"') : stage.index("</table>", stage.index("confusion"))]
    assert "Iterative execution" in matrix and "iterative_execution" not in matrix and "<abbr" not in matrix
    drill = client.get("/studies/alpha/agreement/?bootstrap=200&axis=failure_type&category=TUS").content.decode()
    assert re.search(r'<th scope="row"><code>TUS-\d+</code> ', drill), "types keep their code beside the name"


def test_the_contrast_selector_offers_only_kinds_with_episodes(paper, client, vera):
    client.force_login(vera)
    html = client.get("/studies/alpha/analysis/?bootstrap=200").content.decode()
    select = html[html.index('name="contrast"') : html.index("</select>", html.index('name="contrast"'))]
    assert "GitHub issue" in select and "Literature record" in select and "Incident" not in select


def test_the_type_confusion_matrix_is_shown_by_category_with_a_drill_down(paper, client, vera):
    client.force_login(vera)
    html = client.get("/studies/alpha/agreement/?bootstrap=200").content.decode()
    assert "by category" in html
    links = re.findall(r'<a href="\?axis=failure_type&amp;category=([A-Z]+)#pairs-h">', html)
    assert links, "category headers link to their types"
    category = links[0]
    drill = client.get(f"/studies/alpha/agreement/?bootstrap=200&axis=failure_type&category={category}")
    page = drill.content.decode()
    assert f"the types of {category}" in page and "← all categories" in page
    rows = re.findall(r'<th scope="row"><code>([A-Z]+-\d+)</code>', page)
    assert rows and all(r.startswith(category) for r in rows)
    stage = client.get("/studies/alpha/agreement/?bootstrap=200&axis=stage").content.decode()
    assert "Iterative execution" in stage and "by category" not in stage


def test_the_adjudication_list_shows_names_and_a_capability_column(client, alice, cases):  # noqa: F811
    client.force_login(alice)
    html = client.get("/studies/alpha/adjudicate/").content.decode()
    assert '<th scope="col">Capabilities</th>' in html
    assert "LLM / model behaviour" in html and "Framework" in html
    assert "TUS-03 Incorrect tool arguments" in html
    cells = _text(html[html.index("<tbody>") :])
    assert "\n    framework" not in cells and "iterative_execution" not in cells and "agent_design" not in cells


def test_the_adjudication_form_counts_what_is_left_and_marks_rationale_required(client, alice, cases):  # noqa: F811
    client.force_login(alice)
    html = client.get(f"/studies/alpha/episodes/{cases['by_type'].pk}/adjudicate/").content.decode()
    assert "<strong>2</strong> episodes left to adjudicate" in html
    assert 'Rationale <span class="required">(required)</span>' in html
    assert 'id="type-filter"' in html and "js/type_picker.js" in html and "/coding-" in html


def _scripts(html: str) -> list[str]:
    return re.findall(r'<script src="([^"]+)"', html)


def test_the_adjudication_form_and_the_coding_page_share_one_type_picker(client, alice, bob, cases):  # noqa: F811
    episode = cases["by_type"]
    client.force_login(alice)
    adjudicate = client.get(f"/studies/alpha/episodes/{episode.pk}/adjudicate/")
    client.force_login(bob)
    coding = client.get(f"/studies/alpha/episodes/{episode.pk}/code/")
    for response in (adjudicate, coding):
        names = {t.name for t in response.templates}
        assert {"annotate/partials/_type_picker.html", "annotate/partials/_type_picker_scripts.html"} <= names
    from annotate.coding.selectors import codebook_picker

    picker = codebook_picker(episode.study.codebook)
    trio = [f"/codebooks/{picker.codebook_id}/coding-{picker.stamp}.js", "/static/js/type_rank.js",
            "/static/js/type_picker.js"]  # fmt: skip
    coding_scripts, adjudicate_scripts = _scripts(coding.content.decode()), _scripts(adjudicate.content.decode())
    at = coding_scripts.index(trio[0])
    assert coding_scripts[at : at + 3] == trio
    own = [s for s in adjudicate_scripts if s not in trio and "htmx" not in s and not s.endswith("/ui.js")]
    assert own == [] and [s for s in adjudicate_scripts if s in trio] == trio, "the same scripts, none of its own"
    html = adjudicate.content.decode()
    assert html.count('id="type-picker"') == 1 and 'data-prefill="empty"' in html
    assert 'data-prefill="always"' in coding.content.decode()
    # The adjudicator's starting type (alice's and bob's differ, so none) has the same detail box as the coding page.
    assert "The chosen type's definition, indicators and example appear here." in html


def test_confidence_is_not_called_agreed_when_it_differs(client, alice, bob, study, make_episode, code):  # noqa: F811
    ep = make_episode(study)
    code(ep, alice, "TUS-03", confidence="high")
    code(ep, bob, "EXT-04", confidence="medium")
    client.force_login(alice)
    html = client.get(f"/studies/alpha/episodes/{ep.pk}/adjudicate/").content.decode()
    row = html[html.index('<th scope="row">Confidence') :]
    row = row[: row.index("</tr>")]
    assert "= agree" not in row and "varies" in row


def test_a_split_coded_document_explains_and_offers_hold_out_or_exclusion(
    client,
    alice,
    bob,
    study,
    make_episode,
    code,  # noqa: F811
):
    from annotate.models import Episode

    ep = make_episode(study, body="First the agent looped. Then it deleted the repo.")
    code(ep, bob, "TUS-03")
    client.force_login(alice)
    doc = ep.document
    client.post(
        f"/studies/alpha/documents/{doc.pk}/episodes/", {"start": 0, "end": 23, "text": "First the agent looped."}
    )
    html = client.get(f"/studies/alpha/documents/{doc.pk}/").content.decode()
    assert f"The whole-document episode {ep.pk} still counts" in html
    assert "Move it to hold-out" in html and "Exclude it from analysis" in html
    client.post(f"/studies/alpha/documents/{doc.pk}/episodes/{ep.pk}/split/", {"split": "excluded"})
    assert Episode.objects.get(pk=ep.pk).split == "excluded"
    assert "still counts" not in client.get(f"/studies/alpha/documents/{doc.pk}/").content.decode()


def test_an_excluded_episode_is_left_out_of_analysis_and_counted(paper):
    from annotate.analysis.arrays import label_arrays
    from annotate.models import Episode

    before = label_arrays(paper)
    ep = Episode.objects.filter(study=paper, split="primary", pk__in=list(before.episode_id)).order_by("pk").first()
    Episode.objects.filter(pk=ep.pk).update(split="excluded")
    after = label_arrays(paper)
    assert after.excluded[ep.document.kind]["excluded by an owner"] == 1
    assert ep.pk not in set(after.episode_id) and len(after.episode_id) == len(before.episode_id) - 1


def test_the_coverage_table_names_the_kind(paper, client, vera):
    from annotate.models import Episode

    Episode.objects.filter(study=paper, document__kind="literature").update(split="holdout")
    client.force_login(vera)
    html = client.get("/studies/alpha/coverage/").content.decode()
    assert "<td>Literature record</td>" in html and "<td>literature</td>" not in html
