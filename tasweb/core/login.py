"""Signing in with a bound on guessing: after TAS_LOGIN_MAX_FAILURES wrong passwords for one
username, or from one client address, within TAS_LOGIN_FAILURE_WINDOW_SECONDS, every attempt
for it is refused (even the right password) until that window has passed.

The counts live in the shared cache (Redis in a deployment), so every web process sees them."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

FAILURES_KEY = "tasweb:core:login-failures:{scope}:{value}"


def max_failures() -> int:
    return int(getattr(settings, "TAS_LOGIN_MAX_FAILURES", 10))


def failure_window_seconds() -> int:
    return int(getattr(settings, "TAS_LOGIN_FAILURE_WINDOW_SECONDS", 900))


def failure_keys(*, username: str, address: str) -> list[str]:
    return [FAILURES_KEY.format(scope="user", value=username.casefold()[:150]),
            FAILURES_KEY.format(scope="ip", value=address)]


def client_address(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def login_blocked(*, username: str, address: str) -> bool:
    counts = cache.get_many(failure_keys(username=username, address=address))
    return any(int(count) >= max_failures() for count in counts.values())


def login_failure_record(*, username: str, address: str) -> None:
    """Count one failure against the username and the address; the window starts at the first."""
    for key in failure_keys(username=username, address=address):
        cache.add(key, 0, timeout=failure_window_seconds())
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: this failure starts a new window
            cache.set(key, 1, timeout=failure_window_seconds())


class ThrottledAuthenticationForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn't match. Please try again.",
        "throttled": "Too many failed sign-ins for this user or from this address; try again in %(minutes)d minutes.",
    }

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request)
        if login_blocked(username=username, address=address):
            raise forms.ValidationError(self.error_messages["throttled"], code="throttled",
                                        params={"minutes": max(1, failure_window_seconds() // 60)})
        try:
            return super().clean()
        except forms.ValidationError:
            login_failure_record(username=username, address=address)
            raise


class LoginView(auth_views.LoginView):
    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True
