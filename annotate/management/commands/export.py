from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotate.exports.datasets import export_write
from annotate.exports.rows import CODERS_PSEUDONYMOUS, CODERS_USERNAMES, FORMATS
from annotate.models import Study


class Command(BaseCommand):
    help = "Export a study's labelled dataset (one row per episode) as JSONL, CSV or Parquet, with a manifest."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("--out", required=True, help="file to write; the manifest goes to OUT.manifest.json")
        parser.add_argument(
            "--filter", action="append", default=[], metavar="NAME=VALUE",
            help="the list endpoints' filters, e.g. --filter kind=github_issue --filter split=primary",
        )  # fmt: skip
        parser.add_argument("--usernames", action="store_true", help="show coders' usernames, not pseudonyms")

    def handle(self, *args, study, fmt, out, filter, usernames, **options):
        target = Study.objects.select_related("codebook").filter(slug=study).first()
        if target is None:
            raise CommandError(f"no study '{study}'")
        filters = dict(item.partition("=")[::2] for item in filter)
        coders = CODERS_USERNAMES if usernames else CODERS_PSEUDONYMOUS
        with tqdm(unit="rows", disable=None, file=self.stderr) as bar:

            def progress(done, total):
                bar.total = total
                bar.update(done - bar.n)

            try:
                man = export_write(
                    study=target, fmt=fmt, out=Path(out), filters=filters, coders=coders, progress=progress
                )
            except ValidationError as exc:
                raise CommandError(f"bad export request: {exc.message_dict}") from exc
        self.stdout.write(f"wrote {man['rows']} rows to {out} (sha256 {man['sha256']}); manifest {out}.manifest.json")
