from django.core.management.base import BaseCommand, CommandError

from annotate.imports.cli import progress_bar, study_or_error, write_summary
from annotate.imports.parsed import ImportFileError
from annotate.imports.services import import_file


class Command(BaseCommand):
    help = "Import literature records (.bib, .ris or .csv, by extension) into a study."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("path", metavar="PATH")

    def handle(self, *args, study, path, **options):
        target = study_or_error(study)
        if not path.lower().endswith((".bib", ".bibtex", ".ris", ".csv")):
            raise CommandError(f"{path}: literature files must be .bib, .ris or .csv")
        try:
            with progress_bar(self.stderr, "import") as progress:
                result = import_file(study=target, path=path, progress=progress)
        except ImportFileError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from exc
        write_summary(self.stdout, result)
