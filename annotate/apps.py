from importlib import import_module

from django.apps import AppConfig
from django.db.models.signals import post_migrate

# Imported once Django is set up, in every process: each registers its job kinds (@job_handler) or its
# Celery tasks (by their pinned names), which the runner and the workers look up by name.
REGISTERING_MODULES = (
    "annotate.jobs.tasks",
    "annotate.incidents.tasks",
    "annotate.analysis.tasks",
    "annotate.analysis.handlers",
    "annotate.coding.handlers",
    "annotate.suggestions.handlers",
    "annotate.imports.handlers",
    "annotate.traces.handlers",
    "annotate.exports.handlers",
)


def _search_index_ensure(sender, using="default", **kwargs) -> None:
    from annotate.documents.search import search_index_ensure

    search_index_ensure(using=using)


class AnnotateConfig(AppConfig):
    name = "annotate"

    def ready(self) -> None:
        for module in REGISTERING_MODULES:
            import_module(module)
        # SQLite rebuilds a table to alter it, which drops the search triggers; put them back after every migrate.
        post_migrate.connect(_search_index_ensure, sender=self, dispatch_uid="annotate.search_index_ensure")
