"""docker-compose.yml and the Dockerfile describe the production shape the README promises:
PostgreSQL, Redis, web (gunicorn), a worker and beat from one image, the simulator unless a
variable names a real cluster. (Docker itself is not run by the suite.)"""

from __future__ import annotations

import yaml

from .conftest import PROJECT_ROOT


def compose() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())


def test_every_service_of_the_production_shape_is_there():
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "web", "worker", "scheduler", "beat"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    for name in ("web", "worker", "scheduler", "beat"):
        assert services[name]["build"] == "." or services[name]["build"]["context"] == "."
        assert services[name]["depends_on"], name


def test_web_migrates_seeds_and_serves_with_gunicorn():
    command = compose()["services"]["web"]["command"]
    assert command.index("migrate --noinput") < command.index("tas_seed") < command.index("gunicorn tasweb.wsgi")
    worker = compose()["services"]["worker"]["command"]
    beat = compose()["services"]["beat"]["command"]
    assert worker[:4] == ["celery", "-A", "tasweb", "worker"] and beat[:4] == ["celery", "-A", "tasweb", "beat"]


def test_scheduling_passes_have_one_process_of_their_own():
    from django.conf import settings

    services = compose()["services"]
    scheduler = services["scheduler"]["command"]
    queues = scheduler[scheduler.index("--queues") + 1]
    assert queues == "scheduler" and scheduler[scheduler.index("--pool") + 1] == "solo"
    assert "--replicas" not in scheduler and "deploy" not in services["scheduler"]
    worker = services["worker"]["command"]
    assert "scheduler" not in worker[worker.index("--queues") + 1].split(",")
    # the settings route passes to that queue (the test settings put everything on one)
    from tasweb.settings import base

    assert base.TAS_SCHEDULER_QUEUE == "scheduler"
    assert base.CELERY_TASK_ROUTES["tasweb.scheduling.tasks.run_pass"]["queue"] == "scheduler"
    assert settings.CELERY_TASK_ROUTES["tasweb.scheduling.tasks.run_pass"]["queue"] == settings.TAS_SCHEDULER_QUEUE


def test_the_cluster_is_the_simulator_unless_a_variable_names_a_real_one():
    env = compose()["services"]["worker"]["environment"]
    assert env["TAS_CLUSTER_SOURCE"] == "${TAS_CLUSTER_SOURCE:-simulator}"
    assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"].startswith("redis://")
    assert env["KUBECONFIG"].startswith("/etc/tas/kube/")
    mounts = compose()["services"]["worker"]["volumes"]
    assert any(m.endswith(":/etc/tas/kube:ro") for m in mounts)


def test_the_image_runs_the_production_settings_as_an_unprivileged_user():
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert "DJANGO_SETTINGS_MODULE=tasweb.settings.production" in dockerfile
    assert "\nUSER app\n" in dockerfile and "collectstatic --noinput" in dockerfile
