import json

from django.core.management.base import BaseCommand, CommandError

from annotate.analysis.cli import study_or_error
from annotate.analysis.documents import coverage_document
from annotate.analysis.params import ParameterError
from annotate.analysis.text import coverage_text


class Command(BaseCommand):
    help = "Hold-out coverage: the share of hold-out episodes coded to an existing type, with a Wilson CI."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument(
            "--codebook-version",
            dest="version",
            metavar="NAME@VERSION",
            help="an earlier codebook version the study used (default: its codebook now)",
        )
        parser.add_argument("--json", action="store_true", help="print the JSON document")

    def handle(self, *args, study, json: bool, version: str | None, **opts):
        try:
            doc = coverage_document(study_or_error(study), version=version)
        except ParameterError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(_dumps(doc) if json else coverage_text(doc))


def _dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
