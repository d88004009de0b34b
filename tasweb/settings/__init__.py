"""Settings package: `DJANGO_SETTINGS_MODULE=tasweb.settings` (the default) means the base settings.

`tasweb.settings.test` is the test suite's, `tasweb.settings.production` a deployment's.
"""

import os

# Python runs this file before any sibling module. Loading base here when a sibling was
# asked for would read the environment before that module has set its own defaults
# (test.py points DATABASE_URL and REDIS_URL at the local servers), so only load it when
# the package itself is the settings module.
if os.environ.get("DJANGO_SETTINGS_MODULE", "tasweb.settings") == "tasweb.settings":
    from tasweb.settings.base import *  # noqa: F403
