"""Signing in with Kubernetes credentials (`TAS_AUTH=kubernetes`), for the API and the pages.

A bearer token that is not one of the service's own is sent to the cluster's API server in
a TokenReview (`authentication.k8s.io/v1`); the user it names (username, uid, groups) is the
reader, a `ClusterUser` that lives only in the request (no database row per cluster user).
What that reader sees is decided by SubjectAccessReviews (`authorization.k8s.io/v1`):

* the workloads of a namespace (and its pods, history, why-pending, LocalQueues and pending
  entries) when the user may `list workloads.kueue.x-k8s.io` in it; other namespaces'
  objects are left out of lists, and their detail URLs answer 404 as if they did not exist;
* cluster-wide views (nodes, topologies, flavors and their trees, ClusterQueues, cohorts,
  the topology page) when the user may `list nodes`; otherwise a 403 that says so.

The namespaces asked about are those of the mirror (of its Workloads and LocalQueues). The
answers are kept `TAS_AUTH_CACHE_SECONDS` in the cache, keyed by a hash of the token (or of
the user and the question), never the token itself. When the API server cannot answer, the
request fails with 503: nothing is ever granted without an answer.

The cluster connection is the mirror's (`tasweb.sources.kubeapi.client_configuration`):
KUBECONFIG / TAS_KUBE_CONTEXT, or the pod's service account, which needs `create` on
`tokenreviews` and `subjectaccessreviews`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header

log = logging.getLogger(__name__)

LOCAL, KUBERNETES = "local", "kubernetes"
AUTH_MODES = (LOCAL, KUBERNETES)
CACHE_PREFIX = "tasweb:kubeauth"
SESSION_KEY = "tas_kubernetes_sign_in"  # {"token": ..., "username": ...}, in the server-side session only
REQUEST_TIMEOUT = (5.0, 10.0)  # connect, read
MAX_PARALLEL_REVIEWS = 8
WORKLOADS = ("kueue.x-k8s.io", "workloads")
NODES = ("", "nodes")
HIDDEN_WORKLOAD = "(a workload of another namespace)"
UNAVAILABLE = "cannot verify the token: the Kubernetes API server is unavailable"
REJECTED = "the Kubernetes API server did not accept the token (expired, revoked, or not a token of this cluster)"


def kubernetes_auth() -> bool:
    return getattr(settings, "TAS_AUTH", LOCAL) == KUBERNETES


def cache_seconds() -> int:
    return max(0, int(getattr(settings, "TAS_AUTH_CACHE_SECONDS", 10)))


# ---------------------------------------------------------------- who


@dataclass(frozen=True)
class Identity:
    """The user a TokenReview authenticated."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()


class ClusterUser:
    """A Kubernetes user as Django and DRF see a signed-in user, without a database row:
    no permissions of the service's own (no admin, no what-if), only what RBAC allows."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    @property
    def username(self) -> str:
        return self.identity.username

    @property
    def groups(self) -> tuple[str, ...]:
        return self.identity.groups

    def get_username(self) -> str:
        return self.identity.username

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False

    def has_perms(self, perms: Iterable[str], obj: Any = None) -> bool:
        return False

    def has_module_perms(self, app_label: str) -> bool:
        return False

    def __str__(self) -> str:
        return self.identity.username

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterUser) and other.identity == self.identity

    def __hash__(self) -> int:
        return hash(self.identity)


class AuthUnavailable(exceptions.APIException):
    """The API server could not answer a review: no access is granted without one."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = UNAVAILABLE
    default_code = "auth_unavailable"


# ---------------------------------------------------------------- the API server


_client_lock = threading.Lock()
_client: Any = None


def _api_client():
    """One client per process on the mirror's cluster configuration (loaded once)."""
    global _client
    with _client_lock:
        if _client is None:
            from kubernetes import client

            from tasweb.sources.kubeapi import KubeConfigError, client_configuration

            try:
                _client = client.ApiClient(client_configuration())
            except KubeConfigError as exc:
                log.error("Kubernetes sign-in: %s", exc)
                raise AuthUnavailable(f"{UNAVAILABLE} (no cluster configuration: see the service's log)") from None
        return _client


def kube_client_reset() -> None:
    """Forget the client (a new configuration is read on the next review)."""
    global _client
    with _client_lock:
        old, _client = _client, None
    if old is not None:
        old.close()


def _server() -> str:
    return _api_client().configuration.host or ""


def _post(what: str, send) -> dict[str, Any]:
    """Send one review through `send(api_client)` and return the API server's JSON answer."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    from tasweb.sources.kubeapi import describe_error

    try:
        response = send(_api_client())
        return json.loads(response.data)
    except ApiException as exc:
        log.warning("Kubernetes sign-in: the API server answered a %s with %s", what, describe_error(exc))
        if exc.status in (401, 403):
            raise AuthUnavailable(f"{UNAVAILABLE}: it refused the service's {what} ({exc.status}); the service "
                                  "account needs create on tokenreviews and subjectaccessreviews") from None
        raise AuthUnavailable(f"{UNAVAILABLE} (it answered {exc.status})") from None
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        log.warning("Kubernetes sign-in: a %s failed: %s", what, describe_error(exc))
        raise AuthUnavailable() from None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def token_review(token: str) -> Identity | None:
    """The user the cluster says the token belongs to; None when it is not a valid token
    (expired, revoked, unknown). Raises AuthUnavailable when the API server cannot say."""
    key = f"{CACHE_PREFIX}:token:{_digest(_server(), token)}"
    answer = cache.get(key)
    if answer is None:
        from kubernetes import client

        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        review = _post("TokenReview", lambda api: client.AuthenticationV1Api(api).create_token_review(
            body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
        review_status = review.get("status") if isinstance(review.get("status"), dict) else {}
        user = review_status.get("user") if isinstance(review_status.get("user"), dict) else {}
        if review_status.get("authenticated") and user.get("username"):
            answer = {"username": str(user["username"]), "uid": str(user.get("uid") or ""),
                      "groups": [str(g) for g in user.get("groups") or []]}
        else:
            answer = {}
        if cache_seconds():
            cache.set(key, answer, timeout=cache_seconds())
    if not answer:
        return None
    return Identity(answer["username"], answer["uid"], tuple(answer["groups"]))


def _review_key(identity: Identity, verb: str, group: str, resource: str, namespace: str) -> str:
    return f"{CACHE_PREFIX}:access:" + _digest(_server(), identity.username, identity.uid, *sorted(identity.groups),
                                               "|", verb, group, resource, namespace)


def _access_review(identity: Identity, verb: str, group: str, resource: str, namespace: str) -> bool:
    from kubernetes import client

    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    spec: dict[str, Any] = {"user": identity.username, "groups": list(identity.groups),
                            "resourceAttributes": attributes}
    if identity.uid:
        spec["uid"] = identity.uid
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    review = _post("SubjectAccessReview", lambda api: client.AuthorizationV1Api(api).create_subject_access_review(
        body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
    review_status = review.get("status") if isinstance(review.get("status"), dict) else {}
    return bool(review_status.get("allowed")) and not review_status.get("denied")


def access_allowed_in(identity: Identity, *, verb: str, group: str, resource: str,
                      namespaces: Iterable[str]) -> set[str]:
    """The namespaces (of those given; "" for a cluster-scoped question) where the user may
    `verb` the resource: cached answers first, the others asked in parallel."""
    wanted = sorted(set(namespaces))
    keys = {namespace: _review_key(identity, verb, group, resource, namespace) for namespace in wanted}
    known = cache.get_many(list(keys.values()))
    answers = {namespace: known[key] for namespace, key in keys.items() if key in known}
    missing = [namespace for namespace in wanted if namespace not in answers]
    if missing:
        if len(missing) == 1:
            asked = [_access_review(identity, verb, group, resource, missing[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_REVIEWS, len(missing))) as pool:
                asked = list(pool.map(lambda ns: _access_review(identity, verb, group, resource, ns), missing))
        fresh = dict(zip(missing, asked, strict=True))
        if cache_seconds():
            cache.set_many({keys[namespace]: allowed for namespace, allowed in fresh.items()},
                           timeout=cache_seconds())
        answers.update(fresh)
    return {namespace for namespace, allowed in answers.items() if allowed}


def access_allowed(identity: Identity, *, verb: str, group: str, resource: str, namespace: str = "") -> bool:
    return bool(access_allowed_in(identity, verb=verb, group=group, resource=resource, namespaces=[namespace]))


# ---------------------------------------------------------------- what a reader sees


def candidate_namespaces() -> list[str]:
    """The namespaces the mirror knows of: its Workloads' and its LocalQueues'."""
    from tasweb.cluster import models as cluster

    workloads = cluster.Workload.objects.order_by().values_list("namespace", flat=True)
    queues = cluster.LocalQueue.objects.order_by().values_list("namespace", flat=True)
    return sorted(workloads.union(queues))  # one query; UNION drops the repeats


class AccessScope:
    """What one request may read. Unrestricted for the service's own users and tokens (and
    for everyone with TAS_AUTH=local); for a ClusterUser, what RBAC allows, asked lazily."""

    def __init__(self, identity: Identity | None) -> None:
        self.identity = identity

    @property
    def unrestricted(self) -> bool:
        return self.identity is None

    @cached_property
    def namespaces(self) -> frozenset[str] | None:
        """The namespaces whose workloads the reader may list; None: every namespace."""
        if self.identity is None:
            return None
        return frozenset(access_allowed_in(self.identity, verb="list", group=WORKLOADS[0], resource=WORKLOADS[1],
                                           namespaces=self._candidates))

    @cached_property
    def _candidates(self) -> list[str]:
        """The mirror's namespaces, read once a request (not cached longer: redaction must
        know a namespace as soon as it holds a workload)."""
        return candidate_namespaces()

    def allows_namespace(self, namespace: str) -> bool:
        if self.identity is None:
            return True
        if "namespaces" in self.__dict__:
            return namespace in self.__dict__["namespaces"]
        return access_allowed(self.identity, verb="list", group=WORKLOADS[0], resource=WORKLOADS[1],
                              namespace=namespace)

    def allows_key(self, key: str) -> bool:
        """A workload named namespace/name."""
        return self.unrestricted or key.partition("/")[0] in (self.namespaces or ())

    @cached_property
    def may_list_nodes(self) -> bool:
        if self.identity is None:
            return True
        return access_allowed(self.identity, verb="list", group=NODES[0], resource=NODES[1])

    def nodes_denied_message(self) -> str:
        who = self.identity.username if self.identity else "this user"
        return (f"{who} may not list nodes: nodes, topologies, flavors, ClusterQueues and cohorts show the whole "
                "cluster and need RBAC permission to list nodes (the namespaces' workloads stay readable)")

    def workloads_q(self, field: str = "namespace") -> Q:
        """Rows whose `field` is a namespace the reader may read."""
        if self.namespaces is None:
            return Q()
        return Q(**{f"{field}__in": sorted(self.namespaces)})

    def events_q(self) -> Q:
        """History events (keyed namespace/name, kept after a workload is deleted) of readable namespaces."""
        if self.namespaces is None:
            return Q()
        q = Q(pk__in=[])
        for namespace in sorted(self.namespaces):
            q |= Q(workload_key__startswith=f"{namespace}/")
        return q

    def visible_keys(self, keys: Iterable[str]) -> list[str]:
        return [key for key in keys if self.allows_key(key)]

    @cached_property
    def _hidden_keys(self) -> re.Pattern | None:
        """Matches a namespace/name of a namespace of the mirror the reader may not read."""
        if self.namespaces is None:
            return None
        hidden = sorted(set(self._candidates) - self.namespaces, key=len, reverse=True)
        if not hidden:
            return None
        names = "|".join(re.escape(namespace) for namespace in hidden)
        return re.compile(rf"(?<![\w./-])(?:{names})/[A-Za-z0-9](?:[-A-Za-z0-9.]*[A-Za-z0-9])?")

    def redact(self, data: Any) -> Any:
        """`data` (JSON-like) with every namespace/name of a namespace the reader may not read
        replaced by HIDDEN_WORKLOAD: explanations and events name the workloads ahead in a
        queue, blocking a placement, or preempted, whatever their namespace."""
        pattern = self._hidden_keys
        if pattern is None:
            return data

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                return pattern.sub(HIDDEN_WORKLOAD, value)
            if isinstance(value, dict):
                return {key: walk(item) for key, item in value.items()}
            if isinstance(value, list | tuple):
                return [walk(item) for item in value]
            return value

        return walk(data)

    @cached_property
    def key(self) -> str:
        """Names what the reader may see, for caches of rendered answers."""
        if self.identity is None:
            return "all"
        return _digest(self.identity.username, *sorted(self.identity.groups), "|", *sorted(self.namespaces or ()))[:16]


UNRESTRICTED = AccessScope(None)
SCOPE_ATTRIBUTE = "_tas_access_scope"


def access_scope(request) -> AccessScope:
    """The request's scope (a Django request or DRF's wrapper of one), worked out once."""
    base = getattr(request, "_request", request)
    scope = getattr(base, SCOPE_ATTRIBUTE, None)
    if scope is None:
        user = getattr(request, "user", None)
        scope = AccessScope(user.identity) if kubernetes_auth() and isinstance(user, ClusterUser) else UNRESTRICTED
        setattr(base, SCOPE_ATTRIBUTE, scope)
    return scope


# ---------------------------------------------------------------- the API's authentication


def bearer_token(header: bytes) -> str | None:
    """The token of `Bearer <token>`; None for another scheme; an error for a malformed one."""
    parts = header.split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("invalid Authorization header: expected `Bearer <token>`")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("invalid Authorization header: the token is not ASCII") from None


class KubernetesTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>` with a token of the cluster (what `kubectl create
    token` prints, or a kubeconfig user's token), checked with a TokenReview. Only with
    TAS_AUTH=kubernetes, and only for tokens that are not the service's own (those are
    TokenAuthentication's, before this class)."""

    def authenticate(self, request):
        if not kubernetes_auth():
            return None
        token = bearer_token(get_authorization_header(request))
        if token is None:
            return None
        identity = token_review(token)
        if identity is None:
            raise exceptions.AuthenticationFailed(REJECTED)
        return ClusterUser(identity), None

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


# ---------------------------------------------------------------- sessions and pages


def local_token_user(token: str):
    """The active user of one of the service's own tokens, or None."""
    from rest_framework.authtoken.models import Token

    row = Token.objects.select_related("user").filter(key=token).first()
    return row.user if row is not None and row.user.is_active else None


def session_sign_in(request: HttpRequest, token: str, identity: Identity) -> None:
    """A new session holding the Kubernetes sign-in. The token stays server-side in the
    session store (the cookie carries only the session key), so the session ends when the
    cluster stops accepting the token."""
    logout(request)  # a fresh session: no earlier user, no fixed session key
    request.session[SESSION_KEY] = {"token": token, "username": identity.username}
    request.session.cycle_key()
    request.user = ClusterUser(identity)


class _PageError:
    def __init__(self, status: int, title: str, message: str, hint: str = "") -> None:
        self.status, self.title, self.message, self.hint = status, title, message, hint


def failure_response(request: HttpRequest, code: int, message: str) -> HttpResponse:
    """A 401 or 503 in the shape the caller reads: JSON for the API, a Kubernetes Status for
    Kueue's visibility paths, a page (or the poll's JSON) for the dashboard."""
    from tasweb.api.exceptions import error_response

    api_code = {401: "authentication_failed", 503: "auth_unavailable"}[code]
    if request.path.startswith("/apis/"):
        reason = {401: "Unauthorized", 503: "ServiceUnavailable"}[code]
        return JsonResponse({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": message, "reason": reason, "code": code}, status=code)
    if request.path.startswith("/api/") or request.GET.get("format") == "live":
        response = error_response(code, message, api_code)
    else:
        title = {401: "Not signed in", 503: "Service unavailable"}[code]
        response = render(request, "dashboard/error.html", {"error": _PageError(code, title, message), "nav": ""},
                          status=code)
    if code == 401:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


class KubernetesIdentityMiddleware:
    """With TAS_AUTH=kubernetes, `request.user` of a page is the ClusterUser of its
    `Authorization: Bearer` header, or of the session's Kubernetes sign-in (checked again
    with the cached TokenReview, so an expired or revoked token ends the session). The API
    authenticates headers itself (DRF); its session authentication reads this user."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if kubernetes_auth():
            try:
                failed = self.identify(request)
            except AuthUnavailable as exc:
                return failure_response(request, 503, str(exc.detail))
            except exceptions.AuthenticationFailed as exc:
                return failure_response(request, 401, str(exc.detail))
            if failed is not None:
                return failed
        return self.get_response(request)

    def identify(self, request: HttpRequest) -> HttpResponse | None:
        if not request.path.startswith(("/api/", "/apis/")):
            token = bearer_token(get_authorization_header(request))
            if token is not None:
                user = local_token_user(token)
                if user is None:
                    identity = token_review(token)
                    if identity is None:
                        return failure_response(request, 401, REJECTED)
                    user = ClusterUser(identity)
                request.user = user
                return None
        session = getattr(request, "session", None)
        stored = session.get(SESSION_KEY) if session is not None else None
        if request.path == reverse("logout"):
            return None  # signing out needs no answer from the API server (it may be down)
        if isinstance(stored, dict) and stored.get("token"):
            identity = token_review(str(stored["token"]))
            if identity is None:
                logout(request)  # the cluster no longer accepts the token: sign in again
                request.user = AnonymousUser()
            else:
                request.user = ClusterUser(identity)
        return None


# ---------------------------------------------------------------- the OpenAPI schema


class KubernetesTokenScheme(OpenApiAuthenticationExtension):
    target_class = KubernetesTokenAuthentication
    name = "kubernetesBearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "With TAS_AUTH=kubernetes: a token of the cluster (`kubectl create token ...`), "
                               "checked with a TokenReview; reads are scoped to the namespaces where its user may "
                               "list workloads.kueue.x-k8s.io, cluster-wide objects need list nodes"}
