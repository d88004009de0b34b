from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "tasweb.scheduling"
    label = "scheduling"
    verbose_name = "Scheduling results and history"

    def ready(self) -> None:
        from tasweb.scheduling import checks  # noqa: F401  (registers the start-up checks)
