from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "tasweb.api"
    label = "api"
    verbose_name = "REST API"
