from django.core.management.base import BaseCommand, CommandError

from annotate.ops.demo import demo_build, demo_incidents_build
from taxonomy.models import Codebook


class Command(BaseCommand):
    help = "Create the demo study ('demo') and an incident desk ('demo-incidents'), and print the demo logins."

    def add_arguments(self, parser):
        parser.add_argument("--reset", action="store_true", help="delete and rebuild the demo studies")

    def handle(self, *args, reset, **options):
        if not Codebook.objects.filter(name="agentic-failures", version="1.0").exists():
            raise CommandError("load the codebook first: manage.py load_codebook fixtures/codebook-v1.json --publish")
        result = demo_build(reset=reset)
        state = "created" if result.created else "already present (use --reset to rebuild)"
        self.stdout.write(f"demo study '{result.study.slug}' {state}")
        desk = demo_incidents_build(reset=reset)
        if desk is not None:
            self.stdout.write(f"incident desk '{desk.slug}': {desk.documents.count()} incidents to triage")
        self.stdout.write("Log in at http://127.0.0.1:8000/ with:")
        for username, password, role in result.logins:
            may = "  (staff: may create studies)" if role == "owner" else ""
            self.stdout.write(f"  {role:6} {username:12} password: {password}{may}")
