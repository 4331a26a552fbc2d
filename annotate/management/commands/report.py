from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.analysis.arrays import codebook_axes
from annotate.analysis.cli import progress_bar, study_or_error
from annotate.analysis.params import ParameterError, parse_params
from annotate.reports.bundle import report_write, report_zip


class Command(BaseCommand):
    help = (
        "Write a study's report bundle into a folder: report.html, report.pdf, figures (SVG, PDF), tables.tex and "
        "CSV, the methods paragraph, provenance.json, and the dataset export that `reproduce` re-runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--out", required=True, metavar="DIR", help="folder to write (created if missing)")
        parser.add_argument("--zip", action="store_true", help="also write DIR.zip")
        parser.add_argument("--bootstrap", metavar="B", help="replicates (default 2000)")
        parser.add_argument("--seed", metavar="S", help="random seed (default 0)")
        parser.add_argument("--cell", metavar="STAGE:CAPABILITY", help="contrast cell (default: largest difference)")
        parser.add_argument("--contrast", metavar="KIND_A-KIND_B", help="default: github_issue-literature")
        parser.add_argument("--cap", metavar="M", help="episodes per cluster in the cap check (default 5)")
        parser.add_argument("--interval", metavar="METHOD", help="cell interval method (default: the analysis page's)")

    def handle(self, *args, study, out, zip, **opts):
        s = study_or_error(study)
        keys = ("bootstrap", "seed", "cell", "contrast", "cap", "interval")
        try:
            params = parse_params(codebook_axes(s), **{k: opts[k] for k in keys})
        except ParameterError as exc:
            raise CommandError(str(exc)) from exc
        folder = Path(out)
        if folder.exists() and not folder.is_dir():
            raise CommandError(f"{folder} exists and is not a folder")
        with progress_bar(self.stderr, "report", "%") as progress:
            prov = report_write(study=s, out=folder, params=params, progress=progress)
        self.stdout.write(f"Wrote {len(prov['files'])} files to {folder}/ (report.html, report.pdf, tables.tex, "
                          "provenance.json, figures/, tables/, export/)")  # fmt: skip
        if zip:
            path = report_zip(folder, folder.with_name(folder.name + ".zip"))
            self.stdout.write(f"Wrote {path}")
        self.stdout.write(f"Re-run it with: manage.py reproduce {folder}")
