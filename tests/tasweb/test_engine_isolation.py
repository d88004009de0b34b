"""The engine (`scheduler/`) stays pure: importing all of it loads neither Django nor Celery."""

from __future__ import annotations

import json

from .conftest import clean_env, run_python

# Runs in a fresh interpreter: this test process has Django loaded already.
IMPORT_EVERY_ENGINE_MODULE = r"""
import contextlib, importlib, io, json, pkgutil, runpy, sys, traceback

import scheduler

errors = {}
imported = []

def failed(name):
    errors[name] = "".join(traceback.format_exception_only(*sys.exc_info()[:2])).strip()

for info in pkgutil.walk_packages(scheduler.__path__, prefix="scheduler.", onerror=failed):
    if info.name == "scheduler.__main__":
        continue  # a program, not a module: importing it runs the command line (done below)
    try:
        importlib.import_module(info.name)
        imported.append(info.name)
    except BaseException:
        failed(info.name)

# `python -m scheduler --help`, in-process, so whatever the entry point imports is counted too.
sys.argv = ["tas", "--help"]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        runpy.run_module("scheduler", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    except BaseException:
        failed("scheduler.__main__")
imported.append("scheduler.__main__")

forbidden = ("django", "celery", "kombu", "rest_framework", "drf_spectacular", "tasweb")
leaked = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
print(json.dumps({"imported": imported, "errors": errors, "leaked": leaked}))
"""


def test_engine_modules_import_without_django_or_celery():
    proc = run_python(IMPORT_EVERY_ENGINE_MODULE, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    assert "scheduler.cli" in report["imported"], report
    problems = "\n".join(f"  {name}: {error}" for name, error in sorted(report["errors"].items()))
    assert not report["errors"], f"engine modules that fail to import:\n{problems}"
    leaked_roots = sorted({name.split(".")[0] for name in report["leaked"]})
    assert not report["leaked"], f"importing the engine loaded {leaked_roots}: {report['leaked'][:20]}"
