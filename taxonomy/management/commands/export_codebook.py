import json

from django.core.management.base import BaseCommand, CommandError

from taxonomy.services import CodebookError, codebook_export, parse_codebook_label


class Command(BaseCommand):
    help = "Write a codebook out in the JSON format that load_codebook reads."

    def add_arguments(self, parser):
        parser.add_argument("--codebook", required=True, metavar="NAME@VERSION")
        parser.add_argument("--out", help="file to write (default: standard output)")

    def handle(self, *args, codebook, out, **options):
        try:
            data = codebook_export(codebook=parse_codebook_label(codebook))
        except CodebookError as exc:
            raise CommandError(str(exc)) from exc
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        if out:
            with open(out, "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            self.stdout.write(text, ending="")
