from django.core.management.base import BaseCommand, CommandError

from taxonomy.services import CodebookError, codebook_publish, parse_codebook_label


class Command(BaseCommand):
    help = "Publish a codebook version; from then on it is immutable."

    def add_arguments(self, parser):
        parser.add_argument("--codebook", required=True, metavar="NAME@VERSION")

    def handle(self, *args, codebook, **options):
        try:
            published = codebook_publish(codebook=parse_codebook_label(codebook))
        except CodebookError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{published.label} published at {published.published_at:%Y-%m-%d %H:%M} UTC")
