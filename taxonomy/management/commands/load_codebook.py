from django.core.management.base import BaseCommand, CommandError

from taxonomy.services import CodebookError, codebook_load, codebook_read_file


class Command(BaseCommand):
    help = "Load or update a codebook from our JSON format (for example fixtures/codebook-v1.json)."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--publish", action="store_true", help="publish (freeze) the codebook after loading")

    def handle(self, *args, path, publish, **options):
        try:
            result = codebook_load(data=codebook_read_file(path), publish=publish)
        except CodebookError as exc:
            raise CommandError(f"{path}: {exc}; nothing was written") from exc
        c = result.counts
        state = "created" if result.created else ("updated" if result.changed else "unchanged")
        self.stdout.write(
            f"{result.codebook.label} {state}: {c['types']} types, {c['categories']} categories, "
            f"{c['source']} sources, {c['stage']} stages, {c['capability']} capabilities"
            + (" (published)" if result.codebook.is_published else " (draft)")
        )
