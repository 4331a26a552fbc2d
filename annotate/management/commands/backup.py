from pathlib import Path

from django.core.management.base import BaseCommand
from django.utils import timezone

from annotate.ops.backup import backup_write


class Command(BaseCommand):
    help = "Write a verifiable backup (dumpdata, pg_dump on PostgreSQL, manifest with counts and a codings digest)."

    def add_arguments(self, parser):
        parser.add_argument("--out", help="directory (default: backups/<timestamp>)")

    def handle(self, *args, out, **options):
        path = Path(out or f"backups/{timezone.now():%Y%m%d-%H%M%S}")
        result = backup_write(out_dir=path)
        counts = result.manifest["counts"]
        self.stdout.write(
            f"backup written to {path}: {counts['annotate.Coding']} codings, {counts['annotate.Episode']} episodes, "
            f"files {', '.join(result.manifest['files'])}"
        )
