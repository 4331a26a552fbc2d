import pytest
from django.core.management import CommandError, call_command

from annotate.models import Study


def test_it_creates_a_study_with_members(codebook, alice, bob, vera):
    call_command(
        "create_study", "--slug", "beta", "--name", "Beta", "--codebook", codebook.label,
        "--owner", "alice", "--coder", "bob", "--viewer", "vera",
    )  # fmt: skip
    study = Study.objects.get(slug="beta")
    roles = dict(study.memberships.values_list("user__username", "role"))
    assert roles == {"alice": "owner", "bob": "coder", "vera": "viewer"}
    assert study.queue_seed != 0


def test_it_refuses_an_unknown_codebook_or_user(codebook, alice):
    with pytest.raises(CommandError, match="no codebook nope@1"):
        call_command("create_study", "--slug", "x", "--name", "X", "--codebook", "nope@1")
    with pytest.raises(CommandError, match="no user 'ghost'"):
        call_command("create_study", "--slug", "x", "--name", "X", "--codebook", codebook.label, "--coder", "ghost")
    assert not Study.objects.exists()


def test_it_refuses_a_duplicate_slug(study, codebook):
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_study", "--slug", "alpha", "--name", "Again", "--codebook", codebook.label)


def test_it_can_create_missing_users(codebook, capsys):
    call_command("create_study", "--slug", "g", "--name", "G", "--codebook", codebook.label,
                 "--owner", "newowner", "--create-users")  # fmt: skip
    assert "created user newowner with password" in capsys.readouterr().out
