"""Settings modules: the embedded default, production's guards, templates and static files."""

from __future__ import annotations

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
