"""Each web process keeps its engine view in a thread of its own: built at the start, then
brought up to date whether requests come or not (so that no visitor waits for a build)."""

from __future__ import annotations

import threading
import time

import pytest

from tasweb.api import state
from tests.api.conftest import upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def wait_for(condition, seconds: float = 20.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_the_keeper_builds_the_view_then_follows_the_mirror(mirror, settings):
    settings.TAS_API_STATE_MAX_AGE = 0  # every look reads the change log
    stop = threading.Event()
    thread = state.view_keeper_start(0.1, stop=stop)
    try:
        assert wait_for(lambda: state._current is not None), "no view built"
        view = state._current
        assert wait_for(lambda: not view.state._snapshots_dirty)  # derived too, for the requests to come
        upsert(workload_object("kept-up", count=1, gpus=1))
        assert wait_for(lambda: "ml/kept-up" in view.workloads), "the view did not follow the mirror"
        assert state._current is view and view.caught_up >= 1
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_the_keeper_makes_the_dashboards_display_of_every_tas_flavor(scheduled, client, django_user_model):
    """The topology page's first visitor finds the display made; after a change the keeper
    brings the kept usage up to date (the same object) instead of counting it afresh."""
    from tasweb.dashboard import selectors

    stop = threading.Event()
    thread = state.view_keeper_start(0.1, stop=stop)
    try:
        assert wait_for(lambda: state._current is not None and state._current.memo), "nothing made"
        view = state._current
        flavors = selectors._tas_flavor_names(view)
        assert flavors
        assert wait_for(lambda: all(("dashboard-capacity", f) in view.memo for f in flavors))
        usage = {f: view.kept[("display-usage", f)] for f in flavors}
        made = view.memo[("dashboard-capacity", flavors[0])]
        client.force_login(django_user_model.objects.create_user("viewer", password="pw"))
        with view.lock:  # the page is served from what the keeper made
            assert client.get("/topology/", {"flavor": flavors[0]}).status_code == 200
            assert view.memo[("dashboard-capacity", flavors[0])] is made
        upsert(workload_object("kept-up", count=1, gpus=1))
        assert wait_for(lambda: "ml/kept-up" in view.workloads and ("dashboard-capacity", flavors[0]) in view.memo)
        assert all(view.kept[("display-usage", f)] is usage[f] for f in flavors)
    finally:
        stop.set()
        thread.join(10)


def test_a_failing_look_is_logged_and_tried_again(mirror, monkeypatch, caplog):
    calls = []

    def failing():
        calls.append(time.monotonic())
        raise RuntimeError("the database is away")

    monkeypatch.setattr(state, "engine_view", failing)
    stop = threading.Event()
    thread = state.view_keeper_start(0.05, stop=stop)
    try:
        assert wait_for(lambda: len(calls) >= 3), "the keeper stopped after a failure"
    finally:
        stop.set()
        thread.join(10)
    assert "the database is away" in caplog.text and "trying again" in caplog.text


def test_no_keeper_when_turned_off(settings):
    settings.TAS_API_VIEW_KEEP_SECONDS = 0
    assert state.view_keeper_start() is None


def test_a_gunicorn_worker_keeps_its_view_and_forks_its_what_ifs(scheduled, user, tmp_path):
    """The service as deployed: gunicorn (gunicorn.conf.py's hook) starts the keeper in its
    worker, which builds the view before any request; a what-if over HTTP is then played in
    a child forked from that worker (a thread of its own beside the request's)."""
    import json
    import subprocess
    import sys
    import urllib.request

    from rest_framework.authtoken.models import Token

    from tests.api.test_schemathesis_served import PROJECT_ROOT, free_port, production_env, wait_until_served

    env = {**production_env(tmp_path), "TAS_API_VIEW_KEEP_SECONDS": "0.5", "DJANGO_LOG_LEVEL": "INFO"}
    log = tmp_path / "gunicorn.log"
    port = free_port()
    with log.open("wb") as err:
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "tasweb.wsgi", "--bind", f"127.0.0.1:{port}",
                                   "--workers", "1"], cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(url, server)
        assert wait_for(lambda: "the web's engine view built from the mirror" in log.read_text()), log.read_text()
        # derived, and the dashboard's display made by the app's warmer: said once
        assert wait_for(lambda: f"{state.VIEW_READY}: built or followed, derived and made by 1 warmer(s)"
                        in log.read_text()), log.read_text()
        token = Token.objects.create(user=user).key
        request = urllib.request.Request(url + "/api/v1/what-if/", method="POST",
                                         data=json.dumps(workload_object("served", count=2, gpus=1)).encode(),
                                         headers={"Authorization": f"Token {token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
        assert [(w["name"], w["status"]) for w in answer["workloads"]] == [("served", "Admitted")]
    finally:
        server.terminate()
        server.wait(timeout=20)
    text = log.read_text()
    assert text.count("the web's engine view built from the mirror") == 1  # built once, by the keeper
    assert text.count(state.VIEW_READY) == 1
    assert "played here instead" not in text and "Traceback" not in text
