"""Token authentication that also takes the `Bearer` keyword Kubernetes clients send."""

from __future__ import annotations

from rest_framework import authentication
from rest_framework.request import Request


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>` (DRF's form) or `Authorization: Bearer <key>` (what
    kubectl and client-go send, so a Kueue visibility client can authenticate unchanged)."""

    keywords = ("Token", "Bearer")

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).split()
        if not header:
            return None
        for keyword in self.keywords:
            if header[0].lower() == keyword.lower().encode():
                self.keyword = keyword
                return super().authenticate(request)
        return None
