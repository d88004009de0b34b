from django.apps import AppConfig


class SimulatorConfig(AppConfig):
    name = "tasweb.simulator"
    label = "simulator"
    verbose_name = "Simulator"
