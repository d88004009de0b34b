#!/usr/bin/env python
"""Django's command-line utility for the TAS service."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:  # a setting the environment got wrong: its message, not a traceback
        sys.exit(f"configuration error: {exc}")


if __name__ == "__main__":
    main()
