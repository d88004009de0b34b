"""Plotly's cartesian bundle (tasweb/dashboard/vendor, see its README) as the static file
`dashboard/vendor/plotly.min.js`: no CDN, no front-end build.

The finder serves it from a folder of its own under TAS_VAR_DIR holding the file and a
gzip of it beside it, so WhiteNoise (which sends a `.gz` sibling to clients that accept
gzip) transfers about 0.5 MB instead of 1.5 MB when it serves from the finders (the
embedded default, the browser tests). `collectstatic` copies the file into STATIC_ROOT,
where the production storage compresses it itself.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
from functools import cached_property
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_PATH = "dashboard/vendor/plotly.min.js"
PLOTLY_GZ_PATH = PLOTLY_PATH + ".gz"


VENDORED = Path(__file__).resolve().parent / "vendor" / "plotly-cartesian.min.js"


def plotly_source() -> Path:
    return VENDORED


def _write_atomically(target: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def vendor_root() -> Path:
    """The folder holding dashboard/vendor/plotly.min.js(.gz) for this version of the bundle."""
    digest = hashlib.sha256(plotly_source().read_bytes()).hexdigest()[:12]
    root = Path(settings.VAR_DIR) / "vendor" / f"plotly-{digest}"
    target = root / PLOTLY_PATH
    if target.exists() and target.with_suffix(".js.gz").exists():
        return root
    target.parent.mkdir(parents=True, exist_ok=True)
    source = plotly_source()
    _write_atomically(target, lambda out: out.write(source.read_bytes()))
    with open(source, "rb") as src:
        data = src.read()
    _write_atomically(target.with_suffix(".js.gz"),
                      lambda out: out.write(gzip.compress(data, compresslevel=9, mtime=0)))
    shutil.copystat(source, target)
    return root


class PlotlyFinder(BaseFinder):
    @cached_property
    def root(self) -> Path:
        return vendor_root()  # on first use, not when the checks instantiate the finder

    @cached_property
    def storage(self) -> FileSystemStorage:
        return FileSystemStorage(location=str(self.root))

    def check(self, **kwargs) -> list:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs):
        if path not in (PLOTLY_PATH, PLOTLY_GZ_PATH):
            return [] if find_all or kwargs.get("all") else None
        found = str(self.root / path)
        return [found] if find_all or kwargs.get("all") else found

    def list(self, ignore_patterns):
        # the gzip too: WhiteNoise serving from the finders only sends alternatives they list
        yield PLOTLY_PATH, self.storage
        yield PLOTLY_GZ_PATH, self.storage
