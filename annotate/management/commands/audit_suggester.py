import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotate.llm import LLMConfigError
from annotate.management.importing import study_or_error
from annotate.suggest_audit import suggester_audit


class Command(BaseCommand):
    help = "Audit a study's suggester with five known-answer controls; exits 1 if any check fails."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument("--backend", choices=["local", "openai"], required=True)
        parser.add_argument("--sample", type=int, metavar="N", help="only the first N types in checks 1 and 3")
        parser.add_argument("--episodes", type=int, default=5, metavar="N", help="episodes in the batch of checks 4-5")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args, study, backend, sample, episodes, json: bool, **options):
        target = study_or_error(study)
        try:
            results = suggester_audit(study=target, backend=backend, sample=sample, n_episodes=episodes)
        except (ValidationError, LLMConfigError) as exc:
            raise CommandError(str(exc)) from exc
        if json:
            self.stdout.write(_json([r.as_dict() for r in results]))
        else:
            for r in results:
                mark = self.style.SUCCESS("PASS") if r.passed else self.style.ERROR("FAIL")
                self.stdout.write(f"{mark} {r.number}. {r.name}: {r.summary}")
                for failure in r.failures[:25]:
                    self.stdout.write(f"       - {failure}")
                if len(r.failures) > 25:
                    self.stdout.write(f"       ... and {len(r.failures) - 25} more")
        if not all(r.passed for r in results):
            raise SystemExit(1)


def _json(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)
