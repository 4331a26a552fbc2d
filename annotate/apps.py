from importlib import import_module
from importlib.util import find_spec
from pkgutil import iter_modules

from django.apps import AppConfig
from django.db.models.signals import post_migrate

from annotate.jobs.registry import registrations_on_first_use

# Each package's handlers.py registers its job kinds (@job_handler) and after-import hooks, and its tasks.py its
# Celery tasks under their pinned names. They are looked up by name, so every process imports them all, on the
# first lookup (annotate.jobs.registry): they pull in numpy, scipy and more, which Django's start need not pay for.
REGISTERING = ("handlers", "tasks")


def registering_modules() -> list[str]:
    """annotate.<package>.handlers and .tasks, for every package that has them."""
    import annotate

    return [
        f"annotate.{info.name}.{leaf}"
        for info in iter_modules(annotate.__path__)
        if info.ispkg and info.name not in {"tests", "migrations"}
        for leaf in REGISTERING
        if find_spec(f"annotate.{info.name}.{leaf}") is not None
    ]


def _registering_modules_import() -> None:
    for module in registering_modules():
        import_module(module)


def _search_index_ensure(sender, using="default", **kwargs) -> None:
    from annotate.documents.search import search_index_ensure

    search_index_ensure(using=using)


class AnnotateConfig(AppConfig):
    name = "annotate"

    def ready(self) -> None:
        registrations_on_first_use(_registering_modules_import)
        # SQLite rebuilds a table to alter it, which drops the search triggers; put them back after every migrate.
        post_migrate.connect(_search_index_ensure, sender=self, dispatch_uid="annotate.search_index_ensure")
