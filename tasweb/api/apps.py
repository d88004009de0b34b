from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "tasweb.api"
    label = "api"
    verbose_name = "REST API"

    def ready(self) -> None:
        from tasweb.api import checks  # noqa: F401  (registers the start-up checks)
