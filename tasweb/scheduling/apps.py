from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "tasweb.scheduling"
    label = "scheduling"
    verbose_name = "Scheduling results and history"
