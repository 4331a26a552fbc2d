from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _search_index_ensure(sender, using="default", **kwargs) -> None:
    from annotate.search import search_index_ensure

    search_index_ensure(using=using)


class AnnotateConfig(AppConfig):
    name = "annotate"

    def ready(self) -> None:
        # SQLite rebuilds a table to alter it, which drops the search triggers; put them back after every migrate.
        post_migrate.connect(_search_index_ensure, sender=self, dispatch_uid="annotate.search_index_ensure")
