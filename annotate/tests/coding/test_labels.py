from types import SimpleNamespace

from annotate.coding.labels import LabelStatus, Reason, disagreeing_axes, resolve_label


def row(coder_id=1, ft=10, src=20, stage=30, cap=40, naf=False, nnt=False):
    return SimpleNamespace(
        coder_id=coder_id, failure_type_id=ft, source_id=src, stage_id=stage, capability_id=cap,
        not_a_failure=naf, needs_new_type=nnt,
    )  # fmt: skip


def test_adjudication_wins():
    label = resolve_label(adjudication=row(ft=99), codings=[row(1), row(2, ft=11)], k=2)
    assert label.status == LabelStatus.ADJUDICATED and label.failure_type_id == 99


def test_agreement_of_all_k_coders_is_the_label():
    label = resolve_label(adjudication=None, codings=[row(1), row(2)], k=2)
    assert label.status == LabelStatus.AGREED and label.stage_id == 30


def test_disagreement_is_excluded_with_a_reason():
    label = resolve_label(adjudication=None, codings=[row(1), row(2, stage=31)], k=2)
    assert (label.status, label.reason, label.usable) == (LabelStatus.NONE, Reason.DISAGREEMENT, False)


def test_incomplete_and_uncoded_are_excluded_with_reasons():
    assert resolve_label(adjudication=None, codings=[row(1)], k=2).reason == Reason.INCOMPLETE
    assert resolve_label(adjudication=None, codings=[], k=2).reason == Reason.UNCODED


def test_single_coder_rule_uses_that_coders_labels():
    label = resolve_label(
        adjudication=row(ft=99), codings=[row(1), row(2, ft=12)], k=2, rule="single_coder", label_coder_id=2
    )
    assert label.status == LabelStatus.SINGLE_CODER and label.failure_type_id == 12


def test_it_names_the_axes_that_disagree():
    assert disagreeing_axes([row(1), row(2, stage=31, cap=41)]) == ["stage", "capability"]
