from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "tasweb.core"
    label = "core"
    verbose_name = "Core"
