"""The agreement document's confusion matrices stay bounded: whole labels fold past CONFUSION_LABELS, totals kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotate.analysis import coders
from annotate.analysis.coders import _confusion, agreement_document
from annotate.analysis.figures import confusion_rows
from annotate.coding.selectors import codebook_picker
from annotate.tests.factories.analysis_factory import build, paper_rows
from lib import stats


def _pair(a: np.ndarray, b: np.ndarray, Q: int) -> stats.PairAgreement:
    none = stats.Estimate(None)
    cells = stats.interrater._confusion_cells(a, b, Q)
    return stats.PairAgreement(0, 1, a.size, none, none, cells, int((a != b).sum()), Q)


def _random_pair(units: int, seed: int) -> tuple[stats.PairAgreement, tuple[str, ...]]:
    """Two coders giving random whole labels (most of them distinct), agreeing on a tenth of the units."""
    rng = np.random.default_rng(seed)
    Q = 4 * units
    a = rng.integers(0, Q, units)
    b = np.where(rng.random(units) < 0.1, a, rng.integers(0, Q, units))
    return _pair(a, b, Q), tuple(f"T{i}/llm/setup/memory" for i in range(Q))


def test_it_keeps_the_overall_confusion_bounded_as_episodes_grow():
    sizes = {}
    for units in (2_000, 8_000):
        pair, labels = _random_pair(units, seed=units)
        conf = _confusion(pair, labels, limit=coders.CONFUSION_LABELS)
        sizes[units] = len(json.dumps(conf))
        assert len(conf["labels"]) == coders.CONFUSION_LABELS + 1
        assert conf["labels_used"] > units  # thousands of labels, as random codes give
        assert conf["other"] == conf["labels_used"] - coders.CONFUSION_LABELS
        assert sum(map(sum, conf["matrix"])) == units
        assert conf["agreed"] == units - pair.disagreeing  # (pair.confusion would be a dense labels^2 matrix)
    # Four times the episodes: the same few kilobytes (unbounded, the matrix was 2.4 MB and 38 MB: labels^2).
    assert sizes[8_000] < 1.1 * sizes[2_000] < 10_000


def test_it_folds_the_least_used_labels_and_keeps_every_total():
    a = np.array([0, 0, 0, 1, 1, 2, 3, 4, 4, 4])
    b = np.array([0, 0, 1, 1, 2, 2, 4, 4, 3, 0])
    labels = ("A", "B", "C", "D", "E")
    pair = _pair(a, b, 5)
    whole = _confusion(pair, labels)
    assert whole["matrix"] == pair.confusion.tolist() and whole["other"] == 0
    conf = _confusion(pair, labels, limit=2)
    # A used 6 times, E 5, then B 4, D 2, C 3: A and E kept (in label order), B, C, D folded.
    assert conf["labels"] == ["A", "E", "3 other whole labels"]
    assert conf["matrix"] == [[2, 0, 1], [1, 1, 1], [0, 1, 3]]
    assert (conf["agreed"], conf["labels_used"], conf["other"]) == (5, 5, 3)
    assert np.array(conf["matrix"]).sum(axis=1).tolist() == [3, 3, 4]  # A, E and B+C+D rows of the whole


def test_the_folded_cell_is_not_shown_as_agreement(study, codes, alice, bob):
    build(study, paper_rows(), codes, [alice, bob])
    picker = codebook_picker(study.codebook)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(coders, "CONFUSION_LABELS", 2)
        doc = agreement_document(study, bootstrap=100)
    overall = next(a for a in doc["axes"] if a["axis"] == "overall")
    stage = next(a for a in doc["axes"] if a["axis"] == "stage")
    conf = overall["pairs"][0]["confusion"]
    assert conf["other"] == conf["labels_used"] - 2 > 0 and len(conf["labels"]) == 3
    assert sum(map(sum, conf["matrix"])) == overall["pairs"][0]["n"]
    assert conf["agreed"] == round(overall["pairs"][0]["percent_agreement"]["value"] * overall["pairs"][0]["n"])
    assert stage["pairs"][0]["confusion"]["other"] == 0  # codebook axes are kept whole
    rows, _ = confusion_rows(conf, picker)
    assert [c["diag"] for c in rows[2]["cells"]] == [False, False, False]
    assert rows[0]["cells"][0]["diag"] and rows[1]["cells"][1]["diag"]
