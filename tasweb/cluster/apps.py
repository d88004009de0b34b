import logging

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate

logger = logging.getLogger(__name__)


def restore_change_triggers(sender, using: str = "default", verbosity: int = 1, **kwargs) -> None:
    """After every `migrate`: the change-log triggers a migration dropped are made again
    (SQLite drops a table's triggers when a migration rebuilds the table)."""
    from tasweb.cluster.changelog import LOG, ensure_change_triggers, mirrored_tables

    connection = connections[using]
    tables = mirrored_tables()
    present = set(connection.introspection.table_names())
    if LOG not in present or any(table not in present for _, table in tables):
        return  # migrated back to before the change log
    made = ensure_change_triggers(connection, tables)
    if made:
        # expected on SQLite, whose table rebuilds drop them (a fresh database's migrations
        # rebuild tables after the change log's migration made them); elsewhere a surprise
        level = logging.INFO if connection.vendor == "sqlite" else logging.WARNING
        logger.log(level, "the mirror's change log: made %d missing trigger(s) again: %s", len(made), ", ".join(made))


class ClusterConfig(AppConfig):
    name = "tasweb.cluster"
    label = "cluster"
    verbose_name = "Mirrored cluster"

    def ready(self) -> None:
        post_migrate.connect(restore_change_triggers, sender=self, dispatch_uid="cluster.restore_change_triggers")
