from annotate.coding.evidence import evidence_locate

TEXT = "Intro.\n\nThe agent **looped** forever calling `search`.\n\n- step one\n- step two\n\nIt looped forever again."


def test_it_finds_an_exact_quote():
    found = evidence_locate(TEXT, "It looped forever again.")
    assert TEXT[found.start : found.end] == found.quote == "It looped forever again."


def test_it_finds_a_quote_selected_from_the_rendered_markdown():
    found = evidence_locate(TEXT, "The agent looped forever calling search")
    assert found.quote == "The agent **looped** forever calling `search"
    assert TEXT[found.start : found.end] == found.quote


def test_it_matches_across_list_bullets_and_line_breaks():
    found = evidence_locate(TEXT, "step one\nstep two")
    assert found.quote == "step one\n- step two"


def test_among_repeated_phrases_the_nearest_to_the_hint_wins():
    first = evidence_locate(TEXT, "looped forever", near=0)
    last = evidence_locate(TEXT, "looped forever", near=len(TEXT))
    assert first.start < last.start
    assert TEXT[last.start :].startswith("looped forever again")


def test_it_rejects_text_that_is_not_in_the_episode():
    assert evidence_locate(TEXT, "the model hallucinated a tool") is None
    assert evidence_locate(TEXT, "   ") is None
    assert evidence_locate(TEXT, "x" * 6000) is None
