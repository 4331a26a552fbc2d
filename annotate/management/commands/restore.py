from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.ops.backup import RestoreError, backup_restore


class Command(BaseCommand):
    help = "Restore a backup written by `backup` into an empty, migrated database and verify it."

    def add_arguments(self, parser):
        parser.add_argument("path", help="the backup directory")

    def handle(self, *args, path, **options):
        try:
            result = backup_restore(backup_dir=Path(path))
        except (RestoreError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from exc
        codings, digest = result["counts"]["annotate.Coding"], result["codings_sha256"][:12]
        self.stdout.write(f"restored and verified: {codings} codings, digest {digest}")
