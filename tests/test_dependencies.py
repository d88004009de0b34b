"""Every third-party package the engine and the service import at run time is a dependency
of the installed project, not only of its development extras (the container image installs
the project without them)."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml", "rest_framework": "djangorestframework", "drf_spectacular": "drf-spectacular",
                 "django_filters": "django-filter", "dj_database_url": "dj-database-url", "psycopg": "psycopg",
                 "prometheus_client": "prometheus-client"}
FIRST_PARTY = {"scheduler", "tasweb"}


def imported_top_level_modules(package: str) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names - FIRST_PARTY - set(sys.stdlib_module_names)


def runtime_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for requirement in project["dependencies"]:
        name = requirement.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip()
        names.add(name.lower())
    return names


def test_the_engine_needs_only_declared_packages():
    for module in imported_top_level_modules("scheduler"):
        assert DISTRIBUTIONS.get(module, module).lower() in runtime_dependencies(), module


def test_the_service_needs_only_declared_packages():
    allowed = runtime_dependencies() | {"celery", "kombu", "redis", "django"}
    for module in imported_top_level_modules("tasweb"):
        assert DISTRIBUTIONS.get(module, module).lower() in allowed, module
