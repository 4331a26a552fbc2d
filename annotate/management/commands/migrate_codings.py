from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from annotate.analysis.cli import progress_bar, study_or_error
from annotate.coding.codebook_maps import MapError, codebook_map_read, codebook_map_validate
from annotate.coding.codebook_moves import (
    RevertRefused,
    codebook_migration_revert,
    codings_migrate,
    codings_move_preview,
)
from annotate.models import Role
from taxonomy.services import CodebookError, parse_codebook_label


class Command(BaseCommand):
    help = "Move a study's codings to another codebook version by a map file (JSON), or revert the latest move."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--to", metavar="NAME@VERSION", help="the published codebook version to move to")
        parser.add_argument("--map", metavar="FILE", help='JSON map: {"types": {OLD: NEW | [NEW, ...] | null}}')
        parser.add_argument("--user", metavar="USERNAME", help="the owner recorded in history (default: the owner)")
        parser.add_argument("--dry-run", action="store_true", help="count what would change; write nothing")
        parser.add_argument("--revert", action="store_true", help="revert the study's latest migration")

    def handle(self, *args, study, to, map, user, dry_run, revert, **opts):
        s = study_or_error(study)
        owner = _owner(s, user)
        if revert:
            return self._revert(s, owner)
        if not to or not map:
            raise CommandError("give --to NAME@VERSION and --map FILE (or --revert)")
        try:
            target = parse_codebook_label(to)
            moves = codebook_map_validate(study=s, to_codebook=target, raw=codebook_map_read(map))
        except CodebookError as exc:
            raise CommandError(str(exc)) from exc
        except MapError as exc:
            raise CommandError(
                "the map cannot be applied, nothing was written:\n  " + "\n  ".join(exc.problems)
            ) from exc
        if dry_run:
            counts = codings_move_preview(study=s, to_codebook=target, moves=moves)
            self.stdout.write(f"{s.slug}: would move (dry run, nothing written) {s.codebook.label} -> {target.label}: "
                              f"{_counts(counts)}")  # fmt: skip
            return
        try:
            with progress_bar(self.stderr, "migrating", "codings") as progress:
                migration = codings_migrate(study=s, to_codebook=target, moves=moves, user=owner, progress=progress)
        except (MapError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{s.slug}: moved (migration {migration.pk}) {migration.from_codebook.label} -> {target.label}: "
            f"{_counts(migration.counts)}"
        )

    def _revert(self, study, owner):
        migration = study.codebook_migrations.filter(reverted_at__isnull=True).first()
        if migration is None:
            raise CommandError(f"study '{study.slug}' has no migration to revert")
        try:
            with progress_bar(self.stderr, "reverting", "codings") as progress:
                result = codebook_migration_revert(migration=migration, user=owner, progress=progress)
        except (RevertRefused, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{study.slug}: reverted migration {migration.pk}, back on {migration.from_codebook.label}: "
            f"restored {result['restored']}, of which edited since {result['edited_since']}"
        )


def _counts(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _owner(study, username):
    if username:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user '{username}'")
        return user
    owners = list(study.memberships.filter(role=Role.OWNER).select_related("user")[:2])
    if len(owners) != 1:
        raise CommandError("the study has several owners (or none): name the one acting with --user")
    return owners[0].user
