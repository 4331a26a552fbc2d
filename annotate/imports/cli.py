"""Shared bits of the import commands: study lookup, the tqdm progress bar, the summary."""

from __future__ import annotations

from contextlib import contextmanager

from django.core.management.base import CommandError
from tqdm import tqdm

from annotate.models import Study


def study_or_error(slug: str) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study with slug '{slug}' (create it with manage.py create_study)")
    return study


@contextmanager
def progress_bar(stream, desc: str):
    """A tqdm bar on stderr, driven by a service's progress(done, total) callback."""
    # Django's OutputWrapper ends every write with a newline, which breaks tqdm's \r redraws.
    out = getattr(stream, "_out", stream)
    bar = tqdm(total=0, desc=desc, unit=" records", file=out, dynamic_ncols=True, mininterval=0.2)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        bar.close()


def write_summary(stdout, result) -> None:
    stdout.write(f"imported: {result.summary()}")
