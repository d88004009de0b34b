"""Who may call the API: reads open to anonymous clients only when the setting allows it;
anything else (what-if, writes) only with a token. With TAS_AUTH=kubernetes reads need
credentials, and cluster-wide objects need RBAC permission to list nodes."""

from __future__ import annotations

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from tasweb.api.authentication import TokenAuthentication
from tasweb.api.kubeauth import access_scope, kubernetes_auth


def anonymous_read_allowed() -> bool:
    """TAS_API_ANONYMOUS_READ, never with TAS_AUTH=kubernetes: reads there are scoped by RBAC."""
    return bool(getattr(settings, "TAS_API_ANONYMOUS_READ", False)) and not kubernetes_auth()


def authenticated_with_token(request: Request) -> bool:
    return bool(request.user and request.user.is_authenticated) and isinstance(
        request.successful_authenticator, TokenAuthentication)


def method_not_served(request: Request, view) -> bool:
    """Whether the view has no handler for the request's method: such a request gets its 405
    from the view (every permission lets it through), not a 401 that would send the client
    for credentials first."""
    method = request.method.lower()
    return method not in view.http_method_names or getattr(view, method, None) is None


class ReadOpenOrAuthenticated(BasePermission):
    """GET/HEAD/OPTIONS: any signed-in user (token or session), or anyone when
    `TAS_API_ANONYMOUS_READ` is on. Other methods: a token."""

    message = "authentication credentials were not provided or are not valid"

    def has_permission(self, request: Request, view) -> bool:
        if method_not_served(request, view):
            return True
        if request.method in SAFE_METHODS:
            return anonymous_read_allowed() or bool(request.user and request.user.is_authenticated)
        return authenticated_with_token(request)


class ClusterWideRead(BasePermission):
    """Objects of the whole cluster (nodes, topologies, flavors, ClusterQueues, cohorts): a
    Kubernetes user needs permission to list nodes (TAS_AUTH=kubernetes)."""

    message = "reading cluster-wide objects needs permission to list nodes"

    def has_permission(self, request: Request, view) -> bool:
        if method_not_served(request, view):
            return True
        scope = access_scope(request)
        if scope.may_list_nodes:
            return True
        self.message = scope.nodes_denied_message()
        return False


class TokenRequired(BasePermission):
    """Only a client that sent a valid token of the service's own (a session, or a
    Kubernetes token, is not enough)."""

    message = ("this endpoint needs a token of the service: send `Authorization: Token <key>` "
               "(manage.py tas_api_token USER); a session or a Kubernetes token is not enough")

    def has_permission(self, request: Request, view) -> bool:
        return method_not_served(request, view) or authenticated_with_token(request)
