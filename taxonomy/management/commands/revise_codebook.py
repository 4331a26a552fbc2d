from django.core.management.base import BaseCommand, CommandError

from taxonomy.services import CodebookError, codebook_revise, parse_codebook_label


class Command(BaseCommand):
    help = "Start a new draft version of a codebook, copied from an existing one."

    def add_arguments(self, parser):
        parser.add_argument("--codebook", required=True, metavar="NAME@VERSION")
        parser.add_argument("--new-version", required=True, help="the new version, e.g. 1.1")

    def handle(self, *args, codebook, new_version, **options):
        try:
            revision = codebook_revise(codebook=parse_codebook_label(codebook), version=new_version)
        except CodebookError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"created draft {revision.label} from {codebook}")
