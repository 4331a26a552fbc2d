import json

from django.core.management.base import BaseCommand

from annotate.analysis.cli import study_or_error
from annotate.analysis.documents import coverage_document
from annotate.analysis.text import coverage_text


class Command(BaseCommand):
    help = "Hold-out coverage: the share of hold-out episodes coded to an existing type, with a Wilson CI."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--json", action="store_true", help="print the JSON document")

    def handle(self, *args, study, json: bool, **opts):
        doc = coverage_document(study_or_error(study))
        self.stdout.write(_dumps(doc) if json else coverage_text(doc))


def _dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
