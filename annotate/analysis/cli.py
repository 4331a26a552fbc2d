"""Shared bits of the analysis commands: study lookup and a tqdm bar for long bootstrap runs."""

from __future__ import annotations

from contextlib import contextmanager

from django.core.management.base import CommandError
from tqdm import tqdm

from annotate.models import Study


def study_or_error(slug: str) -> Study:
    study = Study.objects.select_related("codebook").filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study with slug '{slug}'")
    return study


@contextmanager
def progress_bar(stream, desc: str, unit: str):
    """A tqdm bar on stderr fed by progress(done, total); it stays silent for runs under a second."""
    # Django's OutputWrapper ends every write with a newline, which breaks tqdm's \r redraws.
    out = getattr(stream, "_out", stream)
    bar = tqdm(total=0, desc=desc, unit=f" {unit}", file=out, dynamic_ncols=True, mininterval=0.2, delay=1.0)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        bar.close()
