from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "tasweb.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        from tasweb.api import state
        from tasweb.dashboard.selectors import display_warm

        if display_warm not in state.view_warmers:
            state.view_warmers.append(display_warm)
