from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "tasweb.cluster"
    label = "cluster"
    verbose_name = "Mirrored cluster"
