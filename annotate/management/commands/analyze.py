import json

from django.core.management.base import BaseCommand, CommandError

from annotate.analysis.cli import progress_bar, study_or_error
from annotate.analysis.documents import analysis_document
from annotate.analysis.params import ParameterError
from annotate.analysis.text import analysis_text
from annotate.analysis.versions import params_for


class Command(BaseCommand):
    help = "Stage x capability matrices per document kind, cluster-bootstrap intervals and sensitivity checks."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--bootstrap", metavar="B", help="replicates (default 2000)")
        parser.add_argument("--seed", metavar="S", help="random seed (default 0)")
        parser.add_argument("--cell", metavar="STAGE:CAPABILITY", help="default: the largest difference")
        parser.add_argument("--contrast", metavar="KIND_A-KIND_B", help="default: github_issue-literature")
        parser.add_argument("--cap", metavar="M", help="episodes per cluster in the cap check (default 5)")
        parser.add_argument("--bca", action="store_true", help="BCa instead of percentile intervals")
        parser.add_argument(
            "--codebook-version",
            dest="version",
            metavar="NAME@VERSION",
            help="an earlier codebook version the study used (default: its codebook now)",
        )
        parser.add_argument("--json", action="store_true", help="print the JSON document")

    def handle(self, *args, study, json: bool, bca: bool, **opts):
        s = study_or_error(study)
        try:
            keys = ("bootstrap", "seed", "cell", "contrast", "cap", "version")
            params, _, _ = params_for(s, {"bca": bca, **{k: opts[k] for k in keys}})
        except ParameterError as exc:
            raise CommandError(str(exc)) from exc
        with progress_bar(self.stderr, "bootstrap", "blocks") as progress:
            doc = analysis_document(s, params, progress=progress)
        self.stdout.write(_dumps(doc) if json else analysis_text(doc))


def _dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
