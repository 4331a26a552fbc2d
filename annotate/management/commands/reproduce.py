import tempfile
import zipfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.analysis.cli import progress_bar
from annotate.reports.reproduce import BundleError, bundle_reproduce
from annotate.reports.tables import NOT_FROM_EXPORT


def _unzipped(path: Path, tmp: str) -> Path:
    """A zipped bundle, extracted; its one top-level folder, or the extraction root."""
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.startswith("/") or ".." in Path(name).parts:
                raise CommandError(f"{path}: unsafe path in the zip: {name}")
        zf.extractall(tmp)
    found = list(Path(tmp).glob("*/provenance.json"))
    return found[0].parent if found else Path(tmp)


class Command(BaseCommand):
    help = (
        "Re-run a report bundle (a folder or zip from `report`): load its export into a scratch study that is "
        "rolled back, recompute, and compare every number in report.html's tables and tables.tex. Exits 0 when "
        "all are identical; otherwise lists each difference (table, row, column, expected, got) and exits 1."
    )

    def add_arguments(self, parser):
        parser.add_argument("bundle", metavar="DIR", help="the bundle folder (or its .zip)")

    def handle(self, *args, bundle, **opts):
        path = Path(bundle)
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        with tempfile.TemporaryDirectory(prefix="faultline-bundle-") as tmp:
            folder = _unzipped(path, tmp) if path.is_file() else path
            try:
                with progress_bar(self.stderr, "reproduce", "blocks") as progress:
                    result = bundle_reproduce(folder, progress=progress)
            except BundleError as exc:
                raise CommandError(str(exc)) from exc
        for key in result.not_compared:
            self.stdout.write(f"not compared: table '{key}': {NOT_FROM_EXPORT[key]}")
        if result.identical:
            self.stdout.write(f"identical: {result.compared_cells} cells in {len(result.compared_tables)} tables "
                              "of report.html and tables.tex")  # fmt: skip
            return
        for d in result.differences:
            self.stdout.write(f"DIFFERENT {d}")
        raise CommandError(f"{len(result.differences)} numbers differ from the bundle")
