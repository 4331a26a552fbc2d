from django.core.management.base import BaseCommand, CommandError

from annotate.imports.cli import progress_bar, study_or_error, write_summary
from annotate.imports.parsed import ImportFileError
from annotate.traces.parsers import FORMATS
from annotate.traces.services import import_traces


class Command(BaseCommand):
    help = (
        "Import agent traces (OTLP/JSON, OpenInference, Langfuse or Phoenix exports, Who&When or MAST files, or "
        "folders of them) into a study."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("paths", nargs="+", metavar="PATH", help="files, or folders of .json/.jsonl files")

    def handle(self, *args, study, fmt, paths, **options):
        target = study_or_error(study)
        try:
            with progress_bar(self.stderr, "files") as progress:
                result = import_traces(study=target, paths=paths, fmt=fmt, progress=progress)
        except ImportFileError as exc:
            raise CommandError(f"{exc}; nothing was imported") from exc
        write_summary(self.stdout, result)
