import json

from django.core.management.base import BaseCommand, CommandError

from annotate.analysis.cli import study_or_error
from annotate.analysis.coders import AGREEMENT_B, agreement_document
from annotate.analysis.text import agreement_text


class Command(BaseCommand):
    help = "Inter-coder agreement per axis and coder pair (kappas, Krippendorff's alpha, AC1) with bootstrap CIs."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--bootstrap", type=int, default=AGREEMENT_B, metavar="B", help="replicates (default 1000)")
        parser.add_argument("--seed", type=int, default=0, metavar="S")
        parser.add_argument("--json", action="store_true", help="print the JSON document")

    def handle(self, *args, study, bootstrap: int, seed: int, json: bool, **opts):
        if not 100 <= bootstrap <= 100_000:
            raise CommandError("--bootstrap must be between 100 and 100,000")
        if not 0 <= seed < 2**32:
            raise CommandError("--seed must be between 0 and 4,294,967,295")
        doc = agreement_document(study_or_error(study), bootstrap=bootstrap, seed=seed)
        self.stdout.write(_dumps(doc) if json else agreement_text(doc))


def _dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
