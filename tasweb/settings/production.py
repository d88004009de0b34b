"""Deployment settings: DEBUG off, a secret key required, secure cookies and HTTPS.

Every secure default can be relaxed from the environment for a plain-HTTP setup such as
the docker-compose stack on localhost, never silently.
"""

from django.core.exceptions import ImproperlyConfigured

from tasweb.settings.base import *  # noqa: F403
from tasweb.settings.base import env_bool, env_int, env_str

DEBUG = env_bool("DJANGO_DEBUG", False)

# Keys that were ever published (base's development key, docker-compose's old default):
# sessions and password-reset links signed with them can be forged by anyone.
PUBLISHED_SECRET_KEYS = {
    "django-insecure-development-only-key-do-not-use-in-production",
    "compose-local-only-change-me-0123456789abcdefghijklmnopqrstuvwxyz",
}
SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set for production settings: generate one with "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'")
if SECRET_KEY in PUBLISHED_SECRET_KEYS or SECRET_KEY.startswith("django-insecure"):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is a published default key; set a random one of your own "
        "(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')")
if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY is too weak ({len(SECRET_KEY)} characters, {len(set(SECRET_KEY))} distinct); "
        "use at least 50 random characters")

# Without DJANGO_ALLOWED_HOSTS only local names are served (base's default), never "*".

# A deployment's API answers only requests with credentials (a token or a session), unless
# the operator opens reading to everyone on purpose.
TAS_API_ANONYMOUS_READ = env_bool("TAS_API_ANONYMOUS_READ", False)

REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    # The browsable API is a development aid; clients get JSON.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}

# Behind a TLS-terminating proxy, trust its X-Forwarded-Proto to know the request was HTTPS.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
# Health probes come from inside the cluster or the compose network over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz(/live)?$"]
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 60 * 60 * 24 * 365)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", True)
# The defaults above are the secure ones, so each one that is off was turned off by its
# variable on purpose (docker-compose on plain-HTTP localhost does): `check --deploy` need
# not warn about that choice again, and stays quiet only for the checks it made.
SILENCED_SYSTEM_CHECKS = [
    *(["security.W008"] if not SECURE_SSL_REDIRECT else []),
    *(["security.W012", "security.W016"] if not SESSION_COOKIE_SECURE else []),
    *(["security.W004"] if not SECURE_HSTS_SECONDS else []),
]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Hashed, compressed static files served by WhiteNoise from STATIC_ROOT (collectstatic).
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
