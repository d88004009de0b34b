"""Who may call the API: reads open to anonymous clients only when the setting allows it;
anything else (what-if, writes) only with a token."""

from __future__ import annotations

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from tasweb.api.authentication import TokenAuthentication


def anonymous_read_allowed() -> bool:
    return bool(getattr(settings, "TAS_API_ANONYMOUS_READ", False))


def authenticated_with_token(request: Request) -> bool:
    return bool(request.user and request.user.is_authenticated) and isinstance(
        request.successful_authenticator, TokenAuthentication)


class ReadOpenOrAuthenticated(BasePermission):
    """GET/HEAD/OPTIONS: any signed-in user (token or session), or anyone when
    `TAS_API_ANONYMOUS_READ` is on. Other methods: a token."""

    message = "authentication credentials were not provided or are not valid"

    def has_permission(self, request: Request, view) -> bool:
        if request.method in SAFE_METHODS:
            return anonymous_read_allowed() or bool(request.user and request.user.is_authenticated)
        return authenticated_with_token(request)


class TokenRequired(BasePermission):
    """Only a client that sent a valid token (a session is not enough)."""

    message = "this endpoint needs a token: send `Authorization: Token <key>` (manage.py tas_api_token USER)"

    def has_permission(self, request: Request, view) -> bool:
        return authenticated_with_token(request)
