import json

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotate.imports.cli import study_or_error
from annotate.suggestions.audit import suggester_audit
from annotate.suggestions.llm import LLMConfigError
from annotate.suggestions.services import suggester_audit_record


class Command(BaseCommand):
    help = (
        "Audit a study's suggester against its own final labels and invariance checks, writing nothing "
        "(--record stores the result for the Suggestions page); exits 1 if a check fails, 2 without enough labels."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--backend", choices=["local", "openai"], required=True)
        parser.add_argument("--sample", type=int, metavar="N", help="only the first N types in checks 5 and 7")
        parser.add_argument("--episodes", type=int, default=5, metavar="N", help="episodes in the batch of checks 8-9")
        parser.add_argument("--record", action="store_true", help="store the result for the Suggestions page")
        parser.add_argument("--user", metavar="USERNAME", help="who recorded it (with --record)")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args, study, backend, sample, episodes, record, user, json: bool, **options):
        target = study_or_error(study)
        recorder = None
        if user:
            recorder = get_user_model().objects.filter(username=user).first()
            if recorder is None:
                raise CommandError(f"no user '{user}'")
        try:
            report = suggester_audit(study=target, backend=backend, sample=sample, n_episodes=episodes)
        except (ValidationError, LLMConfigError) as exc:
            raise CommandError(str(exc)) from exc
        if record:
            suggester_audit_record(study=target, report=report, user=recorder)
        if json:
            self.stdout.write(_json(report.as_dict()))
        else:
            for r in report.checks:
                mark = {True: self.style.SUCCESS("PASS"), False: self.style.ERROR("FAIL")}.get(
                    r.passed, self.style.WARNING("N/A ")
                )
                self.stdout.write(f"{mark} {r.number}. {r.name}: {r.summary}")
                for failure in r.failures[:25]:
                    self.stdout.write(f"       - {failure}")
                if len(r.failures) > 25:
                    self.stdout.write(f"       ... and {len(r.failures) - 25} more")
        if report.passed is False:
            raise SystemExit(1)
        if report.passed is None:
            raise SystemExit(2)


def _json(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)
