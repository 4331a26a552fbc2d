import json

import pytest
from django.core.management import CommandError, call_command

from conftest import CODEBOOK
from taxonomy.models import AxisValue, Category, Codebook, CodebookRule, FailureType


def counts():
    return (
        Codebook.objects.count(),
        AxisValue.objects.count(),
        Category.objects.count(),
        FailureType.objects.count(),
        CodebookRule.objects.count(),
    )


def write(tmp_path, data, name="cb.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


@pytest.fixture
def good():
    return json.loads(CODEBOOK.read_text())


@pytest.mark.django_db
def test_it_loads_65_types_12_categories_and_the_axes(capsys):
    call_command("load_codebook", str(CODEBOOK))
    cb = Codebook.objects.get(name="agentic-failures", version="1.0")
    assert cb.failure_types.count() == 65
    assert cb.categories.count() == 12
    assert cb.axis_values.filter(axis="source").count() == 8
    assert cb.axis_values.filter(axis="stage").count() == 7
    assert cb.axis_values.filter(axis="capability").count() == 6
    assert "65 types, 12 categories, 8 sources, 7 stages, 6 capabilities" in capsys.readouterr().out


@pytest.mark.django_db
def test_it_round_trips_the_json_exactly(tmp_path, good):
    call_command("load_codebook", str(CODEBOOK))
    out = tmp_path / "out.json"
    call_command("export_codebook", "--codebook", "agentic-failures@1.0", "--out", str(out))
    assert json.loads(out.read_text()) == good


@pytest.mark.django_db
def test_it_is_idempotent(capsys):
    call_command("load_codebook", str(CODEBOOK))
    before = counts()
    call_command("load_codebook", str(CODEBOOK))
    assert counts() == before
    assert "unchanged" in capsys.readouterr().out


def _dup_type(d):
    d["types"][3]["code"] = d["types"][2]["code"]


def _unknown_axis(d):
    d["axes"]["mood"] = [{"code": "x", "name": "X", "definition": "x"}]


def _unknown_category(d):
    d["types"][5]["category"] = "NOPE"


def _unknown_stage(d):
    d["types"][7]["typical_stages"] = ["teatime"]


def _missing_field(d):
    del d["types"][10]["definition"]


def _dup_axis_code(d):
    d["axes"]["stage"][1]["code"] = d["axes"]["stage"][0]["code"]


def _wrong_type(d):
    d["types"][0]["indicators"] = "not a list"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_dup_type, "types[3] (code 'SPC-03'): duplicate type code 'SPC-03'"),
        (_unknown_axis, "unknown axis 'mood'"),
        (_unknown_category, "unknown category 'NOPE'"),
        (_unknown_stage, "unknown stage 'teatime' in typical_stages"),
        (_missing_field, "types[10] (code"),
        (_dup_axis_code, "axes.stage[1]"),
        (_wrong_type, "types[0] (code 'SPC-01'): field 'indicators' must be a list of strings"),
    ],
)
def test_it_rejects_a_bad_codebook_naming_the_entry_and_writes_nothing(tmp_path, good, mutate, expected):
    call_command("load_codebook", str(CODEBOOK))  # something already stored must survive
    before = counts()
    good["version"] = "2.0"
    mutate(good)
    with pytest.raises(CommandError) as err:
        call_command("load_codebook", write(tmp_path, good))
    assert expected in str(err.value)
    assert "nothing was written" in str(err.value)
    assert counts() == before


@pytest.mark.django_db
def test_it_names_the_line_of_invalid_json(tmp_path):
    with pytest.raises(CommandError, match=r"invalid JSON at line 4, column 1"):
        call_command("load_codebook", write(tmp_path, '{\n "name": "x",\n "version": \n}'))
    assert counts() == (0, 0, 0, 0, 0)


@pytest.mark.django_db
def test_it_refuses_to_change_a_published_codebook(tmp_path, good):
    call_command("load_codebook", str(CODEBOOK), "--publish")
    good["types"][0]["name"] = "Changed name"
    with pytest.raises(CommandError, match="published and immutable"):
        call_command("load_codebook", write(tmp_path, good))
    assert FailureType.objects.get(code=good["types"][0]["code"]).name != "Changed name"


@pytest.mark.django_db
def test_it_updates_a_draft_in_place(tmp_path, good):
    call_command("load_codebook", str(CODEBOOK))
    ids = set(FailureType.objects.values_list("pk", flat=True))
    good["types"][0]["name"] = "Renamed in draft"
    removed = good["types"].pop()["code"]
    call_command("load_codebook", write(tmp_path, good))
    assert FailureType.objects.get(code=good["types"][0]["code"]).name == "Renamed in draft"
    assert not FailureType.objects.filter(code=removed).exists()
    # Updated in place: codings that point at a type keep pointing at it.
    assert set(FailureType.objects.values_list("pk", flat=True)) < ids


def test_it_fails_clearly_on_a_missing_file():
    with pytest.raises(CommandError, match="cannot read"):
        call_command("load_codebook", "/nonexistent/codebook.json")
