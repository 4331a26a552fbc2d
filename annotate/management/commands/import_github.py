from datetime import UTC, date, datetime

from django.core.management.base import BaseCommand, CommandError

from annotate.imports.cli import progress_bar, study_or_error, write_summary
from annotate.imports.github import GitHubError
from annotate.imports.parsed import ImportFileError
from annotate.imports.services import import_file, import_github_repo


def _iso(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            parsed = datetime.combine(date.fromisoformat(value), datetime.min.time())
        except ValueError:
            raise CommandError(f"--since must be an ISO 8601 date or time, not '{value}'") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Command(BaseCommand):
    help = "Import GitHub issues into a study from a file (--file) or live from the REST API (--repo)."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--file", metavar="PATH", help="JSON array, gh --json output, or JSON Lines")
        source.add_argument("--repo", metavar="OWNER/NAME")
        parser.add_argument("--include-prs", action="store_true", help="import pull requests too")
        parser.add_argument("--label", action="append", default=[], help="only issues with this label (repeatable)")
        parser.add_argument("--since", help="only issues updated at or after this ISO 8601 date")
        parser.add_argument("--state", choices=["all", "open", "closed"], default="all")
        parser.add_argument("--with-comments", action="store_true", help="append the comments to each body")

    def handle(self, *args, study, file, repo, include_prs, label, since, state, with_comments, **options):
        target = study_or_error(study)
        if file and (label or since or with_comments or state != "all"):
            raise CommandError("--label, --since, --state and --with-comments apply to --repo only")
        try:
            with progress_bar(self.stderr, "import") as progress:
                if file:
                    result = import_file(study=target, path=file, include_prs=include_prs, progress=progress)
                else:
                    result = import_github_repo(
                        study=target, repo=repo, labels=label, since=_iso(since) if since else None, state=state,
                        with_comments=with_comments, include_prs=include_prs, progress=progress,
                    )  # fmt: skip
        except ImportFileError as exc:
            raise CommandError(f"{file}: {exc}; nothing was imported") from exc
        except GitHubError as exc:
            raise CommandError(f"{exc}; nothing was imported") from exc
        write_summary(self.stdout, result)
        if result.stopped:
            raise CommandError(f"stopped early, keeping the {result.seen} issues above: {result.stopped}")
