"""Settings modules: the embedded default, production's guards, templates and static files."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.template import engines

from .conftest import PROJECT_ROOT, clean_env, run_python

STRONG_KEY = "k3Q9vXy7LmN2pR8sT4uW6zA1bC5dE0fG-h_J+iK=oP%qS@tU!vW#xY$zZ^aB&cD*eF"


def test_static_files_are_found_and_collectstatic_has_a_target():
    assert finders.find("css/app.css") == str(PROJECT_ROOT / "static" / "css" / "app.css")
    # collectstatic must not write into the source folder it collects from.
    assert settings.STATIC_ROOT
    assert PROJECT_ROOT / "static" not in [settings.STATIC_ROOT, *settings.STATIC_ROOT.parents]


def test_base_template_renders_blocks_and_stylesheet():
    page = engines["django"].from_string(
        '{% extends "base.html" %}'
        "{% block title %}Topology{% endblock %}"
        "{% block content %}<p>tree</p>{% endblock %}"
    ).render({})

    assert page.startswith("<!DOCTYPE html>")
    assert "<title>Topology · Topology Aware Scheduling</title>" in page
    assert "<p>tree</p>" in page
    assert '/static/css/app.css"' in page


def test_production_refuses_to_start_without_a_secret_key():
    proc = run_python(
        "import django; django.setup()",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings.production"),
    )
    assert proc.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in proc.stderr


def test_production_passes_the_deployment_checks_with_only_a_secret_key():
    env = clean_env(DJANGO_SECRET_KEY=STRONG_KEY)
    proc = run_python(
        "import sys; from django.core.management import execute_from_command_line;"
        "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING',"
        " '--settings', 'tasweb.settings.production'])",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "no issues" in proc.stdout


def test_boolean_variables_reject_unclear_values():
    proc = run_python(
        "import django; django.setup()",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", DJANGO_DEBUG="maybe"),
    )
    assert proc.returncode != 0
    assert "DJANGO_DEBUG: expected a boolean" in proc.stderr


BAD_VARIABLES = [
    ("DJANGO_DEBUG", "maybe", "DJANGO_DEBUG: expected a boolean (true/false, 1/0, yes/no, on/off), got 'maybe'"),
    ("DJANGO_LOG_LEVEL", "loud", "DJANGO_LOG_LEVEL: expected a log level (NOTSET, DEBUG, INFO, WARN, WARNING, "
                                 "ERROR, CRITICAL, FATAL), got 'loud'"),
    ("TAS_LOG_LEVELS", "celery.app.trace", "TAS_LOG_LEVELS: 'celery.app.trace': expected logger=LEVEL, "
                                           "e.g. celery.app.trace=DEBUG"),
    ("TAS_LOG_LEVELS", "tasweb=INFO, =DEBUG", "TAS_LOG_LEVELS: '=DEBUG': expected logger=LEVEL, "
                                             "e.g. celery.app.trace=DEBUG"),
    ("TAS_LOG_LEVELS", "tasweb=chatty", "TAS_LOG_LEVELS: tasweb: expected a log level (NOTSET, DEBUG, INFO, WARN, "
                                        "WARNING, ERROR, CRITICAL, FATAL), got 'chatty'"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_VARIABLES)
def test_manage_py_names_a_bad_variable_in_one_line(name, value, message):
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120, check=False,
                          env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", **{name: value}))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"configuration error: {message}"], proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("command", ["worker", "beat"])
def test_celery_names_a_bad_variable_in_one_line(command, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "celery", "-A", "tasweb", command], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120, check=False,
                          env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", TAS_VAR_DIR=str(tmp_path),
                                        DJANGO_LOG_LEVEL="loud"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"configuration error: {BAD_VARIABLES[1][2]}", proc.stderr


def test_per_logger_levels_are_set_and_the_rest_left_alone():
    proc = run_python(
        "import django, logging; django.setup();"
        " print(logging.getLevelName(logging.getLogger('celery.app.trace').level),"
        " logging.getLevelName(logging.getLogger('tasweb.scheduling').getEffectiveLevel()),"
        " logging.getLevelName(logging.getLogger('celery.beat').level),"
        " logging.getLevelName(logging.getLogger().level))",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings",
                      TAS_LOG_LEVELS=" celery.app.trace=debug , tasweb=WARNING,"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["DEBUG", "WARNING", "NOTSET", "INFO"]


def test_an_empty_database_url_means_the_embedded_sqlite_file():
    proc = run_python(
        "import django; django.setup(); from django.conf import settings;"
        " print(settings.DATABASES['default']['ENGINE'])",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", DATABASE_URL=""),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "django.db.backends.sqlite3"


def test_a_database_url_django_cannot_use_is_named():
    proc = run_python(
        "import django; django.setup()",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", DATABASE_URL="mongodb://db:27017/tas"),
    )
    assert proc.returncode != 0
    assert "DATABASE_URL is not a database URL Django can use" in proc.stderr
    assert "mongodb" in proc.stderr


def compose_app_environment() -> dict[str, str]:
    """The environment docker-compose gives web, worker and beat, with `${VAR:-default}`
    resolved to its default and a generated key for the one variable without a default."""
    import re

    import yaml

    raw = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())["services"]["web"]["environment"]
    resolved = {name: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value)) for name, value in raw.items()}
    resolved["DJANGO_SECRET_KEY"] = STRONG_KEY
    return resolved


def test_compose_has_no_default_secret_key_and_refuses_to_start_without_one():
    import yaml

    text = (PROJECT_ROOT / "docker-compose.yml").read_text()
    compose = yaml.safe_load(text)
    for name in ("web", "worker", "scheduler", "beat"):
        key = compose["services"][name]["environment"]["DJANGO_SECRET_KEY"]
        # `${VAR:?message}`: docker compose stops with the message when VAR is unset or empty
        assert key.startswith("${DJANGO_SECRET_KEY:?") and key.endswith("}"), (name, key)
    assert "compose-local-only" not in text


@pytest.mark.parametrize("key", ["", "   ", "compose-local-only-change-me-0123456789abcdefghijklmnopqrstuvwxyz",
                                 "django-insecure-development-only-key-do-not-use-in-production", "short"])
def test_production_settings_refuse_an_empty_published_or_weak_key(key):
    proc = run_python(
        "import django; django.setup()",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings.production", DJANGO_SECRET_KEY=key),
    )
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and "DJANGO_SECRET_KEY" in proc.stderr


def test_check_deploy_is_clean_with_the_compose_environment(tmp_path):
    env = clean_env(**compose_app_environment(), TAS_VAR_DIR=str(tmp_path))
    assert env["DJANGO_SETTINGS_MODULE"] == "tasweb.settings.production"
    proc = run_python(
        "from django.core.management import execute_from_command_line;"
        "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "no issues" in proc.stdout


def test_every_setting_the_code_reads_can_be_set_from_the_environment():
    """A `TAS_*` setting the code reads with getattr(settings, ...) is one the base settings
    read from the environment, as the README's tables promise: one only the code's default
    backs would ignore the variable set for it."""
    import re

    read = set()
    for folder in ("tasweb", "scheduler"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            read |= set(re.findall(r'getattr\(settings, "(TAS_[A-Z0-9_]+)"', path.read_text()))
    base = (PROJECT_ROOT / "tasweb" / "settings" / "base.py").read_text()
    from_environment = set(re.findall(r'^(TAS_[A-Z0-9_]+) = env_\w+\("\1"', base, flags=re.M))
    dict_settings = {"TAS_SIMULATOR"}  # a settings file's dict; its fields have TAS_SIM_* variables
    assert read - from_environment - dict_settings == set()


def test_every_variable_the_readme_lists_is_read():
    import re

    readme = (PROJECT_ROOT / "README.md").read_text()
    listed = {name for row in readme.splitlines() if row.startswith("| `")
              for name in re.findall(r"`((?:TAS|DJANGO)_[A-Z0-9_]+)`", row.split("|")[1])}
    sources = "".join(path.read_text() for folder in ("tasweb", "scheduler")
                      for path in (PROJECT_ROOT / folder).rglob("*.py"))
    sources += (PROJECT_ROOT / "gunicorn.conf.py").read_text()
    simulator_fields = set(re.findall(r"^    (\w+): ", (PROJECT_ROOT / "tasweb/simulator/config.py").read_text(),
                                      flags=re.M))
    unread = {name for name in listed if f'"{name}"' not in sources
              and not (name.startswith("TAS_SIM_") and name[len("TAS_SIM_"):].lower() in simulator_fields)}
    assert listed and unread == set()
