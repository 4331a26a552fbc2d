from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotate.exports.datasets import dataset_import


class Command(BaseCommand):
    help = "Load an export (.jsonl, .csv or .parquet) into a new study; its codebook must be loaded."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--study", help="slug for the new study (default: the one in the file)")
        parser.add_argument("--owner", help="username to make the study's owner")
        parser.add_argument("--coders-per-episode", type=int, help="k, when the file has no manifest beside it")

    def handle(self, *args, path, study, owner, coders_per_episode, **options):
        if not Path(path).is_file():
            raise CommandError(f"no file '{path}'")
        owner_user = None
        if owner:
            owner_user = get_user_model().objects.filter(username=owner).first()
            if owner_user is None:
                raise CommandError(f"no user '{owner}'")
        try:
            result = dataset_import(
                path=Path(path), slug=study, owner=owner_user, coders_per_episode=coders_per_episode
            )
        except ValidationError as exc:
            raise CommandError(f"{path}: {'; '.join(_messages(exc))}; nothing was written") from exc
        self.stdout.write(
            f"study '{result.study.slug}': {result.rows} episodes, {result.codings} codings, "
            f"{result.adjudications} adjudications, {result.suggestions} suggestions"
        )


def _messages(exc: ValidationError) -> list[str]:
    """The file's errors as they are; a column's (label_stage, ...) prefixed by its name where it is not said."""
    if not hasattr(exc, "error_dict"):
        return exc.messages
    return [
        m if field == "file" or field in m else f"{field}: {m}" for field, ms in exc.message_dict.items() for m in ms
    ]
