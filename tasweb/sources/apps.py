from django.apps import AppConfig


class SourcesConfig(AppConfig):
    name = "tasweb.sources"
    label = "sources"
    verbose_name = "Cluster sources"
