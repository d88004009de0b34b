"""Signing in with a bound on guessing: after TAS_LOGIN_MAX_FAILURES wrong passwords for one
username, or from one client address, within TAS_LOGIN_FAILURE_WINDOW_SECONDS, every attempt
for it is refused (even the right password) until that window has passed.

With TAS_AUTH=kubernetes the page has a second form: a Kubernetes bearer token, checked with
a TokenReview (tasweb.api.kubeauth); rejected tokens count against the client address.

The counts live in the shared cache (Redis in a deployment), so every web process sees them."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from tasweb.api.kubeauth import (
    REJECTED,
    AuthUnavailable,
    Identity,
    access_scope,
    kubernetes_auth,
    session_sign_in,
    token_review,
)

FAILURES_KEY = "tasweb:core:login-failures:{scope}:{value}"


def max_failures() -> int:
    return int(getattr(settings, "TAS_LOGIN_MAX_FAILURES", 10))


def failure_window_seconds() -> int:
    return int(getattr(settings, "TAS_LOGIN_FAILURE_WINDOW_SECONDS", 900))


def failure_keys(*, username: str | None, address: str) -> list[str]:
    """The counters of a username and of an address (only the address's without a username)."""
    keys = [FAILURES_KEY.format(scope="ip", value=address)]
    if username is not None:
        keys.insert(0, FAILURES_KEY.format(scope="user", value=username.casefold()[:150]))
    return keys


def client_address(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def login_blocked(*, username: str | None, address: str) -> bool:
    counts = cache.get_many(failure_keys(username=username, address=address))
    return any(int(count) >= max_failures() for count in counts.values())


def login_failure_record(*, username: str | None, address: str) -> None:
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


class KubernetesTokenForm(forms.Form):
    """A Kubernetes bearer token: `kubectl create token SERVICE_ACCOUNT`, or a kubeconfig user's."""

    token = forms.CharField(label="Kubernetes token", strip=True, max_length=16384,
                            widget=forms.PasswordInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    error_messages = {
        "rejected": REJECTED + ".",
        "throttled": "Too many rejected tokens from this address; try again in %(minutes)d minutes.",
    }

    def __init__(self, request: HttpRequest | None = None, *args, **kwargs) -> None:
        self.request = request
        self.identity: Identity | None = None
        super().__init__(*args, **kwargs)

    def clean(self):
        token = self.cleaned_data.get("token") or ""
        address = client_address(self.request)
        if login_blocked(username=None, address=address):
            raise forms.ValidationError(self.error_messages["throttled"], code="throttled",
                                        params={"minutes": max(1, failure_window_seconds() // 60)})
        if token:
            try:
                self.identity = token_review(token)
            except AuthUnavailable as exc:
                raise forms.ValidationError(str(exc.detail), code="unavailable") from None
            if self.identity is None:
                login_failure_record(username=None, address=address)
                raise forms.ValidationError(self.error_messages["rejected"], code="rejected")
        return self.cleaned_data


def safe_next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return settings.LOGIN_REDIRECT_URL


class LoginView(auth_views.LoginView):
    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if kubernetes_auth():
            context.setdefault("token_form", KubernetesTokenForm(self.request))
        return context


@sensitive_post_parameters("token")
@csrf_protect
@never_cache
@require_POST
def token_login(request: HttpRequest) -> HttpResponse:
    """The sign-in page's Kubernetes form: a valid token starts a session as its user."""
    if not kubernetes_auth():
        return redirect("login")
    form = KubernetesTokenForm(request, data=request.POST)
    if form.is_valid() and form.identity is not None:
        session_sign_in(request, form.cleaned_data["token"], form.identity)
        target = safe_next(request)
        try:
            if target.startswith("/topology/") and not access_scope(request).may_list_nodes:
                target = "/workloads/"  # the topology page needs list nodes: start where the reader can read
        except AuthUnavailable:
            pass  # the page asks again, and says the API server is unavailable
        return HttpResponseRedirect(target)
    status = 503 if form.has_error("__all__", "unavailable") else 200
    context = {"form": ThrottledAuthenticationForm(request), "token_form": form, "next": safe_next(request),
               "token_failed": True}
    return render(request, "registration/login.html", context, status=status)
