"""Start-up checks of the API's settings: a bad TAS_AUTH is reported when the service starts
(`manage.py check`, runserver, the workers) instead of leaving readers locked out or let in."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from tasweb.api.kubeauth import AUTH_MODES


@register()
def auth_settings_check(app_configs, **kwargs) -> list[Error]:
    errors = []
    mode = getattr(settings, "TAS_AUTH", "local")
    if mode not in AUTH_MODES:
        errors.append(Error(f"TAS_AUTH: {mode!r} is not a sign-in mode; expected one of {', '.join(AUTH_MODES)}",
                            hint="local: the service's own users and tokens; kubernetes: also Kubernetes tokens, "
                                 "reads scoped by RBAC", id="api.E001"))
    seconds = getattr(settings, "TAS_AUTH_CACHE_SECONDS", 10)
    if not isinstance(seconds, int) or seconds < 0:
        errors.append(Error(f"TAS_AUTH_CACHE_SECONDS: expected a number of seconds (0 or more), got {seconds!r}",
                            id="api.E002"))
    if mode == "kubernetes" and getattr(settings, "SESSION_ENGINE", "").endswith("signed_cookies"):
        errors.append(Error("TAS_AUTH=kubernetes keeps a signed-in user's token in the session, and "
                            f"SESSION_ENGINE {settings.SESSION_ENGINE} would put it in the cookie",
                            hint="use a server-side session store (the default database sessions, or the cache)",
                            id="api.E003"))
    return errors
