from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotate.imports.cli import study_or_error
from annotate.suggestions.llm import LLMConfigError
from annotate.suggestions.services import default_backend, suggestions_make


class Command(BaseCommand):
    help = "Make code suggestions for a study's episodes that have none from this backend yet."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, metavar="SLUG")
        parser.add_argument(
            "--backend", choices=["local", "openai"], help="default: openai if a key is set, else local"
        )
        parser.add_argument("--limit", type=int, metavar="N", help="at most N episodes")
        parser.add_argument(
            "--refresh",
            action="store_true",
            help="also re-ask episodes whose suggestion came from an older example pool of the same prompt "
            "(the LLM's few-shot examples change as labels are added; without this flag new labels re-ask nothing)",
        )

    def handle(self, *args, study, backend, limit, refresh, **options):
        target = study_or_error(study)
        if limit is not None and limit < 1:
            raise CommandError("--limit must be a positive number")
        bar = tqdm(total=0, desc="suggest", unit=" episodes", file=getattr(self.stderr, "_out", self.stderr))

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            result = suggestions_make(
                study=target, backend=backend or default_backend(), limit=limit, progress=progress, refresh=refresh
            )
        except (ValidationError, LLMConfigError) as exc:
            raise CommandError(str(getattr(exc, "message_dict", exc))) from exc
        finally:
            bar.close()
        self.stdout.write(
            f"{result['backend']} ({result['model']}): {result['suggested']} suggested, {result['errors']} failed, "
            f"{result['flagged']} with a dropped quote; tokens {result['input_tokens']} in / "
            f"{result['output_tokens']} out, cost {result['cost']:.4f}"
            + (f"; local model trained on {result['trained_on']} labels" if result["trained_on"] else "")
        )
