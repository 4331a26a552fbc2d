"""The cold-start prior: fitted on the real-issue dev split only, read back as it was fitted, and the repository's
kind moving the source the way the codebook's rules R07/R08 say."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotate.suggestions import cold_prior as cp
from annotate.suggestions.base import codebook_spec_from_data
from annotate.suggestions.codebook_index import codebook_index, readings, type_similarities
from annotate.suggestions.local import LocalSuggester
from bench.real_issues.dataset import split_of


@pytest.fixture(scope="module")
def spec():
    from conftest import CODEBOOK

    return codebook_spec_from_data(json.loads(CODEBOOK.read_text()))


def test_the_shipped_prior_was_fitted_on_dev_split_repositories_only():
    data = cp.prior_data()
    assert data and data["fitted_on"]["split"] == "dev"
    test_repos = [r for r in data["repositories"] if split_of(r) != "dev"]
    assert test_repos == []
    # Numbers only: the word model keeps at most 40 weights per type, over terms of two or more dev issues.
    assert all(len(row) <= 40 for row in data["words"]["coef"].values())


def test_the_shipped_prior_was_fitted_on_the_committed_issues_csv():
    import hashlib

    from bench.real_issues.dataset import CSV_PATH, read_csv

    data = cp.prior_data()
    rows = read_csv(CSV_PATH)  # checks the split rule and the four final codes of every row
    assert data["fitted_on"]["csv_sha256"] == hashlib.sha256(CSV_PATH.read_bytes()).hexdigest()
    assert data["fitted_on"]["issues"] == sum(r.split == "dev" for r in rows)


def test_it_knows_repository_kinds_by_table_name_and_codebook(spec):
    prior = cp.cold_prior(spec)
    assert cp.repo_kind("langchain-ai/langchain", None, spec) == "framework"
    assert cp.repo_kind("someone/langchain-community-tools", None, spec) == "framework"  # contains a framework name
    assert cp.repo_kind("acme/cline", None, spec) == "coding_agent"
    assert cp.repo_kind("acme/agent-eval-harness", None, spec) == "tooling"
    assert cp.repo_kind("acme/unknown-thing", None, spec) == ""
    # The codebook's own rule R08 names Langflow as a platform users assemble agents on.
    assert ("langflow", "framework") in {(n, k) for names, k in cp._codebook_names(spec) for n in names}
    # The learned table wins over names: a product named after a framework is what the dev split says it is.
    for repo, kind in list(prior.repositories.items())[:20]:
        assert cp.repo_kind(repo, prior, spec) == kind


def test_it_reads_back_a_fitted_prior_exactly_and_learns_words_from_fictional_issues(spec, tmp_path):
    from bench.real_issues import fit_prior
    from bench.real_issues.dataset import Row

    texts = {
        "EXT-01": "The weather API was down and returned 503 service unavailable for every call of the agent.",
        "CTL-01": "The agent repeated the identical tool call again and again in an endless loop until killed.",
    }
    items = []
    for n in range(24):
        code = "EXT-01" if n % 2 else "CTL-01"
        row = Row(url=f"https://github.com/acme/r{n}/issues/1", repository=f"acme/r{n}", split="dev", language="en",
                  repo_kind="framework" if n % 3 else "coding_agent",
                  codes={"failure_type": code, "source": "tool_service" if code == "EXT-01" else "llm",
                         "stage": "iterative_execution", "capability": "actuation"})  # fmt: skip
        items.append({"row": row, "title": f"Issue {n}", "body": texts[code] + f" Run {n}."})
    index = codebook_index(spec)
    r = readings(index, [i["body"] for i in items], [i["title"] for i in items])
    sims = type_similarities(index, r)
    params = {"temperature": 0.03, "alpha": 0.5, "word_weight": 0.5, "word_c": 16.0, "beta": 4.0, "gamma": 1.0}
    data = json.loads(json.dumps(fit_prior.fit(spec, items, sims, list(r.english), params)))
    prior = cp._build(spec, data)
    assert prior is not None and prior.word_weight == 0.5
    p = cp.word_probabilities(prior, ["an endless loop: the same tool call repeated", "the API returned 503 error"])
    codes = list(spec.type_codes)
    assert codes[int(np.argmax(p[0]))] == "CTL-01" and codes[int(np.argmax(p[1]))] == "EXT-01"
    # Type frequencies: both seen types get more prior mass than an unseen one.
    assert prior.log_prior[codes.index("CTL-01")] > prior.log_prior[codes.index("SPC-01")]
    # Axis tables: EXT-01 was always coded tool_service here, smoothed towards the codebook's typical value.
    src = spec.axis_codes("source")
    assert src[int(np.argmax(prior.axis_given_type["source"][codes.index("EXT-01")]))] == "tool_service"


def test_it_does_not_apply_to_a_codebook_without_the_fitted_codes(spec):
    from dataclasses import replace

    smaller = replace(spec, types=spec.types[:10], fingerprint="other")
    assert cp.cold_prior(smaller) is None


def test_the_repository_kind_moves_the_source_towards_framework_for_a_frameworks_own_repo(spec):
    text = (
        "After upgrading, the built-in retriever tool raises KeyError on valid input and the agent run crashes "
        "inside the library's executor."
    )
    suggester = LocalSuggester(spec)
    prior = cp.cold_prior(spec)
    f = cp.kind_factors(prior, "source", ["framework", "coding_agent"], len(spec.axis_codes("source")))
    fw = spec.axis_codes("source").index("framework")
    assert f[0, fw] > f[1, fw]  # the dev split saw framework source more often in frameworks' own repositories
    a_fw, a_other = suggester.suggest_texts([text, text], clusters=["langchain-ai/langchain", "acme/unknown-thing"])
    assert a_fw.candidates[0].failure_type == a_other.candidates[0].failure_type
    assert a_fw.candidates[0].source == "framework"


def test_a_trained_model_codes_the_source_as_the_repositorys_labelled_episodes_were_coded(spec):
    """Two repositories whose issues read alike: the study coded one's as framework bugs, the other's as the model's
    mistakes. An unlabelled issue of each takes its repository's source; a labelled one's own label is left out."""
    from annotate.suggestions.local import _repository_shares
    from annotate.suggestions.local_model import TrainingExample, model_train

    body = "The agent called the search tool with an empty query and the run stopped with a KeyError in the loop. {i}"
    examples = [
        TrainingExample(episode_id=i + 1, text=body.format(i=i), failure_type="TUS-02", not_a_failure=False,
                        source=source, stage="iterative_execution", capability="actuation", cluster=repo,
                        kind="github_issue")
        for i, (repo, source) in enumerate([("acme/lib", "framework")] * 12 + [("acme/app", "llm")] * 12)
    ]  # fmt: skip
    trained = model_train(spec, examples)
    suggester = LocalSuggester(spec, trained)
    text = body.format(i="new")
    lib, app = suggester.suggest_texts([text, text], clusters=["acme/lib", "acme/app"])
    assert (lib.candidates[0].source, app.candidates[0].source) == ("framework", "llm")
    codes = spec.axis_codes("source")
    shares = _repository_shares(trained, "source", codes, ["acme/lib", "acme/lib", "elsewhere"], [None, 1, None])
    assert shares[0, codes.index("framework")] == 1.0
    assert shares[1].sum() == pytest.approx(1.0) and shares[2].sum() == 0  # episode 1 is not counted for itself
    only = model_train(spec, examples[:1] + examples[12:])  # acme/lib has one label: episode 1's own
    assert _repository_shares(only, "source", codes, ["acme/lib"], [1]).sum() == 0
