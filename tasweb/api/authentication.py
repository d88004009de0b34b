"""Token authentication that also takes the `Bearer` keyword Kubernetes clients send."""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from tasweb.api.kubeauth import kubernetes_auth


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>` (DRF's form) or `Authorization: Bearer <key>` (what
    kubectl and client-go send, so a Kueue visibility client can authenticate unchanged).

    With TAS_AUTH=kubernetes a bearer token that is not one of the service's own is left to
    the next class (KubernetesTokenAuthentication), which asks the cluster about it."""

    keywords = ("Token", "Bearer")

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).split()
        if not header:
            return None
        for keyword in self.keywords:
            if header[0].lower() == keyword.lower().encode():
                self.keyword = keyword
                try:
                    return super().authenticate(request)
                except exceptions.AuthenticationFailed:
                    if keyword == "Bearer" and kubernetes_auth():
                        return None
                    raise
        return None
