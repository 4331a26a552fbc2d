import json

from django.core.management.base import BaseCommand, CommandError

from taxonomy.services import CodebookError, codebook_diff, parse_codebook_label


class Command(BaseCommand):
    help = "Show the types, categories, axis values and rules added, removed and changed between two codebooks."

    def add_arguments(self, parser):
        parser.add_argument("old", metavar="NAME@VERSION")
        parser.add_argument("new", metavar="NAME@VERSION")

    def handle(self, *args, old, new, **options):
        try:
            diffs = codebook_diff(old=parse_codebook_label(old), new=parse_codebook_label(new))
        except CodebookError as exc:
            raise CommandError(str(exc)) from exc
        if not diffs:
            self.stdout.write(f"{old} and {new} have the same contents")
            return
        for d in diffs:
            sign = {"added": "+", "removed": "-", "changed": "~"}[d.change]
            self.stdout.write(f"{sign} {d.kind} {d.code} {d.change}")
            for name, before, after in d.fields:
                self.stdout.write(f"    {name}: {json.dumps(before, ensure_ascii=False)}")
                self.stdout.write(f"    {' ' * len(name)}→ {json.dumps(after, ensure_ascii=False)}")
