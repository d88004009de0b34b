"""Plotly's cartesian bundle (tasweb/dashboard/vendor, see its README) as the static file
`dashboard/vendor/plotly.min.js`: no CDN, no front-end build.

Plotly adds its own style sheet to the page while drawing (an inline <style> element), which
a Content-Security-Policy without 'unsafe-inline' blocks. Plotly skips that when the page
already holds an element `#plotly.js-style-global.no-inline-styles`: the dashboard links
`dashboard/vendor/plotly.css` that way, written here from the rules the bundle itself
carries, so the two never disagree.

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
import re
import shutil
import tempfile
from functools import cached_property
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_PATH = "dashboard/vendor/plotly.min.js"
PLOTLY_GZ_PATH = PLOTLY_PATH + ".gz"
PLOTLY_CSS_PATH = "dashboard/vendor/plotly.css"
SERVED = (PLOTLY_PATH, PLOTLY_GZ_PATH, PLOTLY_CSS_PATH)


VENDORED = Path(__file__).resolve().parent / "vendor" / "plotly-cartesian.min.js"


def plotly_source() -> Path:
    return VENDORED


# The bundle's style rules: `{"X,X div":'direction:ltr;…', …}`, X and Y standing for the plot's
# and the notifier's selectors (plotly.js src/css, compiled into build/plotcss.js).
_RULES_START = '{"X,X div":'
_JS_STRING = re.compile(r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_JS_KEY = re.compile(_JS_STRING.pattern + r"|([A-Za-z_$][\w$]*)")  # the minifier unquotes plain names
_SELECTOR_NAMES = ((re.compile(r"^,"), " ,"), (re.compile("X"), ".js-plotly-plot .plotly"),
                   (re.compile("Y"), ".plotly-notifier"))


class PlotlyCssError(ValueError):
    """The bundle does not hold Plotly's style rules in the shape this module reads."""


def _js_string(literal: str) -> str:
    body = literal[1:-1]
    return re.sub(r"\\(.)", lambda m: m.group(1), body)


def _read_rules(bundle: str) -> list[tuple[str, str]]:
    start = bundle.find(_RULES_START)
    if start < 0:
        raise PlotlyCssError(f"{plotly_source().name}: Plotly's style rules ({_RULES_START}…) not found")
    rules: list[tuple[str, str]] = []
    pos = start + 1
    while True:
        key = _JS_KEY.match(bundle, pos)
        if key is None or bundle[key.end()] != ":":
            raise PlotlyCssError(f"{plotly_source().name}: unreadable style rule at offset {pos}")
        value = _JS_STRING.match(bundle, key.end() + 1)
        if value is None:
            raise PlotlyCssError(f"{plotly_source().name}: unreadable style of {key.group(1)} at offset {pos}")
        selector = _js_string(key.group(1)) if key.group(1) else key.group(2)
        rules.append((selector, _js_string(value.group(1))))
        pos = value.end() + 1
        if bundle[value.end()] == "}":
            return rules
        if bundle[value.end()] != ",":
            raise PlotlyCssError(f"{plotly_source().name}: unexpected {bundle[value.end()]!r} at offset {value.end()}")


def plotly_css(bundle: str) -> str:
    """The style sheet Plotly would add itself. It inserts each rule at the top of its sheet,
    so the first rule ends up last and wins ties: the file lists them in reverse to match."""
    lines = []
    for selector, declarations in reversed(_read_rules(bundle)):
        for pattern, replacement in _SELECTOR_NAMES:
            selector = pattern.sub(replacement, selector)
        lines.append(f"{selector}{{{declarations}}}")
    return "/* Plotly's own style rules, written from the bundle it ships with (dashboard/staticfiles.py) */\n" + \
        "\n".join(lines) + "\n"


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
    css = root / PLOTLY_CSS_PATH
    if target.exists() and target.with_suffix(".js.gz").exists() and css.exists():
        return root
    target.parent.mkdir(parents=True, exist_ok=True)
    source = plotly_source()
    _write_atomically(target, lambda out: out.write(source.read_bytes()))
    with open(source, "rb") as src:
        data = src.read()
    _write_atomically(target.with_suffix(".js.gz"),
                      lambda out: out.write(gzip.compress(data, compresslevel=9, mtime=0)))
    shutil.copystat(source, target)
    text = plotly_css(data.decode("utf-8"))
    _write_atomically(css, lambda out: out.write(text.encode("utf-8")))
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
        if path not in SERVED:
            return [] if find_all or kwargs.get("all") else None
        found = str(self.root / path)
        return [found] if find_all or kwargs.get("all") else found

    def list(self, ignore_patterns):
        # the gzip too: WhiteNoise serving from the finders only sends alternatives they list
        for path in SERVED:
            yield path, self.storage
