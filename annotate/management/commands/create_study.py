import secrets

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.studies.services import study_create
from taxonomy.services import CodebookError, parse_codebook_label


class Command(BaseCommand):
    help = "Create a study on a codebook, with its owner, coders and viewers."

    def add_arguments(self, parser):
        parser.add_argument("--slug", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--codebook", required=True, metavar="NAME@VERSION")
        parser.add_argument("--owner", metavar="USERNAME")
        parser.add_argument("--coder", action="append", default=[], metavar="USERNAME")
        parser.add_argument("--viewer", action="append", default=[], metavar="USERNAME")
        parser.add_argument(
            "--create-users", action="store_true", help="create missing users with a random password (printed once)"
        )

    @transaction.atomic
    def handle(self, *args, slug, name, codebook, owner, coder, viewer, create_users, **options):
        try:
            cb = parse_codebook_label(codebook)
        except CodebookError as exc:
            raise CommandError(str(exc)) from exc
        users = {}
        for username in filter(None, [owner, *coder, *viewer]):
            users[username] = self._user(username, create_users)
        try:
            study = study_create(
                slug=slug,
                name=name,
                codebook=cb,
                owner=users.get(owner),
                coders=[users[u] for u in coder],
                viewers=[users[u] for u in viewer],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"created study {study.slug} on {cb.label} with {study.memberships.count()} member(s)")

    def _user(self, username, create):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user '{username}' (create it first, or pass --create-users)")
            password = secrets.token_urlsafe(12)
            user = User.objects.create_user(username=username, password=password)
            self.stdout.write(f"created user {username} with password {password}")
        return user
