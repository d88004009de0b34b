"""gunicorn.conf.py: read from the working directory by every command that starts the web
process (the image's, docker-compose's and the manifests' all run gunicorn from the project
root), it sets the request timeout from TAS_WEB_TIMEOUT and refuses a bad value in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def resolved(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run([GUNICORN, "tasweb.wsgi", "--print-config"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def setting(output: str, name: str) -> str:
    return next(line.split("=", 1)[1].strip() for line in output.splitlines() if line.split("=")[0].strip() == name)


def test_the_timeout_is_two_minutes_unless_set():
    run = resolved()
    assert run.returncode == 0, run.stderr
    assert setting(run.stdout, "timeout") == "120"
    assert setting(run.stdout, "graceful_timeout") == "30"
    run = resolved(TAS_WEB_TIMEOUT="300")
    assert setting(run.stdout, "timeout") == "300"


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_a_bad_timeout_is_one_clear_line(value):
    run = resolved(TAS_WEB_TIMEOUT=value)
    assert run.returncode != 0
    assert run.stderr.strip() == f"TAS_WEB_TIMEOUT: expected a whole number of seconds (1 or more), got {value!r}"


def test_every_start_command_runs_from_the_directory_holding_the_file():
    assert (ROOT / "gunicorn.conf.py").is_file()
    assert "WORKDIR /app" in (ROOT / "Dockerfile").read_text()
    assert "COPY . ." in (ROOT / "Dockerfile").read_text()
    assert "gunicorn.conf.py" not in (ROOT / ".dockerignore").read_text()
