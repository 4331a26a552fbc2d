from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
