from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "tasweb.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
