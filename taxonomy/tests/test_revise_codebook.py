import pytest
from django.core.management import CommandError, call_command

from taxonomy.models import Codebook, FailureType
from taxonomy.services import codebook_diff


@pytest.mark.django_db
def test_it_copies_a_published_codebook_into_a_new_draft(codebook):
    call_command("revise_codebook", "--codebook", codebook.label, "--new-version", "1.1")
    revision = Codebook.objects.get(name=codebook.name, version="1.1")
    assert revision.parent == codebook
    assert not revision.is_published
    assert revision.failure_types.count() == 65
    assert codebook_diff(old=codebook, new=revision) == []


@pytest.mark.django_db
def test_it_refuses_an_existing_version(codebook):
    with pytest.raises(CommandError, match="already exists"):
        call_command("revise_codebook", "--codebook", codebook.label, "--new-version", "1.0")


@pytest.mark.django_db
def test_it_diffs_added_removed_and_changed_field_by_field(codebook, capsys):
    call_command("revise_codebook", "--codebook", codebook.label, "--new-version", "1.1")
    revision = Codebook.objects.get(version="1.1")
    changed = revision.failure_types.get(code="TUS-03")
    changed.definition = "A sharper definition."
    changed.indicators = ["only one indicator now"]
    changed.save()
    revision.failure_types.get(code="SPC-01").delete()
    FailureType.objects.create(
        codebook=revision, code="TUS-99", name="New type", category=changed.category, definition="d",
        example="e", typical_source="llm", typical_stages=["planning"], typical_capabilities=["reasoning"],
    )  # fmt: skip
    diffs = {(d.kind, d.code): d for d in codebook_diff(old=codebook, new=revision)}
    assert diffs[("type", "TUS-99")].change == "added"
    assert diffs[("type", "SPC-01")].change == "removed"
    fields = {f[0] for f in diffs[("type", "TUS-03")].fields}
    assert fields == {"definition", "indicators"}

    call_command("diff_codebook", codebook.label, revision.label)
    out = capsys.readouterr().out
    assert "+ type TUS-99 added" in out
    assert "- type SPC-01 removed" in out
    assert "~ type TUS-03 changed" in out
    assert "A sharper definition." in out


@pytest.mark.django_db
def test_the_diff_page_shows_changes(client, alice, codebook):
    call_command("revise_codebook", "--codebook", codebook.label, "--new-version", "1.1")
    revision = Codebook.objects.get(version="1.1")
    t = revision.failure_types.get(code="MEM-01")
    t.name = "Renamed memory type"
    t.save()
    client.force_login(alice)
    response = client.get(f"/codebooks/{revision.pk}/diff/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "MEM-01" in html
    assert "Renamed memory type" in html
