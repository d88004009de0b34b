"""A Kubernetes API server in a thread, for the tests of the mirror and the writer.

It speaks the part of the API the official client uses here, over real HTTP/1.1:

* discovery of ``kueue.x-k8s.io`` versions (``GET /apis/kueue.x-k8s.io/<version>``);
* lists with ``limit`` / ``continue`` over a consistent snapshot, ``metadata.resourceVersion``
  set, items without kind/apiVersion for the core kinds (as the real server sends them);
* watches from a resourceVersion: chunked, newline-delimited JSON events, BOOKMARKs when
  asked for, an ERROR event with code 410 when the version was compacted away, the server
  ending the response after ``timeoutSeconds``;
* PATCH of a Workload's status, a pod and a pod's status: recorded as received, then
  applied (merge patch; the strategic merge directives the writer sends);
* POST of TokenReviews and SubjectAccessReviews (Kubernetes sign-in), answered from test
  data: `add_token` / `expire_token` (token -> user and groups, or expired) and `allow`
  (user or group, verb, API group, resource, namespace -> allowed, RBAC-like).

Every change bumps one global resourceVersion, as etcd's revision does. Faults are armed by
methods: `expire` (410 for watches from before it), `fail_next_watches` (an HTTP 410
answer), `drop_watch` (the connection closed in the middle of an event), `stall_watches`
(nothing sent, connection kept open), `fail_patches` (error answers to PATCH),
`fail_reviews` (an error status for every review, or the connection closed unanswered).
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KUEUE = "kueue.x-k8s.io"

# kind -> (plural, namespaced, group)
KINDS = {
    "Node": ("nodes", False, ""),
    "Pod": ("pods", True, ""),
    "Namespace": ("namespaces", False, ""),
    "Topology": ("topologies", False, KUEUE),
    "ResourceFlavor": ("resourceflavors", False, KUEUE),
    "ClusterQueue": ("clusterqueues", False, KUEUE),
    "LocalQueue": ("localqueues", True, KUEUE),
    "Cohort": ("cohorts", False, KUEUE),
    "AdmissionCheck": ("admissionchecks", False, KUEUE),
    "WorkloadPriorityClass": ("workloadpriorityclasses", False, KUEUE),
    "Workload": ("workloads", True, KUEUE),
}
PLURALS = {plural: kind for kind, (plural, _, _) in KINDS.items()}
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
EXPIRED = "expired"
ANY = "*"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any = None
    status: int = 0
    list_rv: int | None = None  # the resourceVersion a list answered with

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


@dataclass
class Watch:
    plural: str
    since: int
    expired_generation: int
    drop_after: int | None = None  # close the connection mid-event after this many more events
    stalled: bool = False


@dataclass
class State:
    rv: int = 100
    objects: dict[str, dict[tuple[str, str], dict]] = field(default_factory=lambda: defaultdict(dict))
    log: dict[str, list[tuple[int, str, dict]]] = field(default_factory=lambda: defaultdict(list))
    compacted: dict[str, int] = field(default_factory=dict)
    expired_generation: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    snapshots: dict[str, tuple[int, list[dict]]] = field(default_factory=dict)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_pod(pod: dict, patch: dict) -> dict:
    """The strategic merge patch semantics the writer relies on, for pods."""
    out = copy.deepcopy(pod)
    spec_patch = patch.get("spec") or {}
    spec = out.setdefault("spec", {})
    for gate in spec_patch.get("schedulingGates") or []:
        if gate.get("$patch") == "delete":
            spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or [] if g["name"] != gate["name"]]
            if not spec["schedulingGates"]:
                spec.pop("schedulingGates")
        elif gate["name"] not in {g["name"] for g in spec.get("schedulingGates") or []}:
            spec.setdefault("schedulingGates", []).append(gate)
    if "nodeSelector" in spec_patch:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **spec_patch["nodeSelector"]}
    status_patch = patch.get("status") or {}
    status = out.setdefault("status", {})
    if "phase" in status_patch:
        status["phase"] = status_patch["phase"]
    for condition in status_patch.get("conditions") or []:
        kept = [c for c in status.get("conditions") or [] if c.get("type") != condition.get("type")]
        status["conditions"] = [*kept, condition]
    return out


class FakeKube:
    def __init__(self, *, kueue_versions: tuple[str, ...] = ("v1beta2", "v1beta1"), bookmark_interval: float = 0.2,
                 token: str = "test-token") -> None:
        self.kueue_versions = kueue_versions
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.cond = threading.Condition()
        self.state = State()
        self.requests: list[Request] = []
        self.patch_failures: dict[str, list[int]] = {}
        self.watch_failures: dict[str, list[int]] = defaultdict(list)
        self.pending_drops: dict[str, int] = {}
        self.pending_stalls: set[str] = set()
        self.open_watches: list[Watch] = []
        self.tokens: dict[str, dict[str, Any] | str] = {}  # token -> TokenReview user, or EXPIRED
        self.rbac: set[tuple[str, str, str, str, str]] = set()  # (subject, verb, group, resource, namespace)
        self.review_failure: int | str | None = None  # an HTTP status, or "drop"
        self.closing = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-kube", daemon=True)

    # -------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeKube:
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self) -> str:
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        })

    # -------------------------------------------------------------- objects

    @staticmethod
    def _key(obj: dict) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") or "", meta["name"]

    def _record(self, plural: str, event_type: str, obj: dict) -> None:
        self.state.log[plural].append((self.state.rv, event_type, copy.deepcopy(obj)))
        self.cond.notify_all()

    def create(self, obj: dict) -> dict:
        plural = KINDS[obj["kind"]][0]
        with self.cond:
            self.state.rv += 1
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2025-06-01T11:00:00Z")
            meta["resourceVersion"] = str(self.state.rv)
            key = self._key(obj)
            assert key not in self.state.objects[plural], f"{obj['kind']} {key} exists"
            self.state.objects[plural][key] = obj
            self._record(plural, "ADDED", obj)
            return copy.deepcopy(obj)

    def update(self, kind: str, name: str, change, *, namespace: str = "") -> dict:
        """Replace an object by `change(copy of it)`'s result (or the copy it changed in place)."""
        plural = KINDS[kind][0]
        with self.cond:
            current = copy.deepcopy(self.state.objects[plural][namespace, name])
            new = change(current) or current
            self.state.rv += 1
            new["metadata"]["resourceVersion"] = str(self.state.rv)
            self.state.objects[plural][namespace, name] = new
            self._record(plural, "MODIFIED", new)
            return copy.deepcopy(new)

    def delete(self, kind: str, name: str, *, namespace: str = "") -> None:
        plural = KINDS[kind][0]
        with self.cond:
            obj = self.state.objects[plural].pop((namespace, name))
            self.state.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.state.rv)
            self._record(plural, "DELETED", obj)

    def get(self, kind: str, name: str, *, namespace: str = "") -> dict:
        with self.cond:
            return copy.deepcopy(self.state.objects[KINDS[kind][0]][namespace, name])

    def objects(self, kind: str) -> list[dict]:
        with self.cond:
            return copy.deepcopy(list(self.state.objects[KINDS[kind][0]].values()))

    @property
    def resource_version(self) -> int:
        with self.cond:
            return self.state.rv

    def events_since(self, rv: int) -> int:
        """How many ADDED/MODIFIED/DELETED events happened after resourceVersion `rv`."""
        with self.cond:
            return sum(1 for log in self.state.log.values() for event_rv, _, _ in log if event_rv > rv)

    # -------------------------------------------------------------- faults

    def expire(self, kind: str) -> int:
        """Compact the kind's history: watching from before now answers 410, and open watches
        get an ERROR event with code 410. Returns the compaction's resourceVersion."""
        plural = KINDS[kind][0]
        with self.cond:
            self.state.rv += 1
            self.state.compacted[plural] = self.state.rv
            self.state.expired_generation[plural] += 1
            self.cond.notify_all()
            return self.state.rv

    def fail_next_watches(self, kind: str, *statuses: int) -> None:
        """Answer the next watch requests of the kind with these HTTP statuses."""
        with self.cond:
            self.watch_failures[KINDS[kind][0]].extend(statuses)

    def drop_watch(self, kind: str, *, after_events: int = 0) -> None:
        """Close the kind's watch connection in the middle of an event, after `after_events`
        more complete events (the open watch, or the next one)."""
        with self.cond:
            self.pending_drops[KINDS[kind][0]] = after_events
            self.cond.notify_all()

    def stall_watches(self, kind: str) -> None:
        """The kind's open watch stops sending anything, its connection kept open."""
        with self.cond:
            self.pending_stalls.add(KINDS[kind][0])
            self.cond.notify_all()

    def fail_patches(self, path: str, *statuses: int) -> None:
        with self.cond:
            self.patch_failures.setdefault(path, []).extend(statuses)

    # -------------------------------------------------------------- sign-in

    def add_token(self, token: str, username: str, *, uid: str = "", groups: tuple[str, ...] = ()) -> None:
        """A token the TokenReview accepts as `username` in `groups` (system:authenticated added)."""
        with self.cond:
            self.tokens[token] = {"username": username, "uid": uid or f"uid-{username}",
                                  "groups": [*groups, "system:authenticated"]}

    def expire_token(self, token: str) -> None:
        with self.cond:
            self.tokens[token] = EXPIRED

    def allow(self, subject: str, verb: str, group: str, resource: str, namespace: str = ANY) -> None:
        """Let a user or a group (matched by name against both) `verb` the resource; namespace
        ANY for every namespace and cluster-scoped questions, as a ClusterRoleBinding does."""
        with self.cond:
            self.rbac.add((subject, verb, group, resource, namespace))

    def fail_reviews(self, failure: int | str | None) -> None:
        """Answer every review with this HTTP status, or "drop" to close the connection
        unanswered; None to answer again."""
        with self.cond:
            self.review_failure = failure

    def reviews(self, path: str = TOKEN_REVIEWS) -> list[Request]:
        """The reviews received (TOKEN_REVIEWS or ACCESS_REVIEWS), failed ones included."""
        return self.requests_to("POST", path)

    def _allowed(self, spec: dict[str, Any]) -> bool:
        subjects = {spec.get("user") or "", *(spec.get("groups") or [])} - {""}
        attributes = spec.get("resourceAttributes") or {}
        verb, group = attributes.get("verb", ""), attributes.get("group", "")
        resource, namespace = attributes.get("resource", ""), attributes.get("namespace", "")
        with self.cond:
            return any(subject in subjects and rule_verb in (verb, ANY) and rule_group == group
                       and rule_resource == resource and rule_namespace in (namespace, ANY)
                       for subject, rule_verb, rule_group, rule_resource, rule_namespace in self.rbac)

    def _review(self, handler, request: Request) -> None:
        with self.cond:
            failure = self.review_failure
        if failure == "drop":
            return self._drop(handler)
        if failure is not None:
            return self._status(handler, request, int(failure), "ServiceUnavailable", f"injected failure {failure}")
        body = request.body if isinstance(request.body, dict) else {}
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        if request.path == TOKEN_REVIEWS:
            with self.cond:
                user = self.tokens.get(spec.get("token") or "")
            if isinstance(user, dict):
                status: dict[str, Any] = {"authenticated": True, "user": user, "audiences": ["https://kubernetes"]}
            else:
                status = {"authenticated": False, "error": "token has expired" if user == EXPIRED
                          else "invalid bearer token"}
            return self._send_json(handler, request, 201, {**body, "status": status})
        if request.path == ACCESS_REVIEWS:
            allowed = self._allowed(spec)
            status = {"allowed": allowed, "reason": "allowed by the test's RBAC table" if allowed else ""}
            return self._send_json(handler, request, 201, {**body, "status": status})
        return self._status(handler, request, 404, "NotFound", f"{request.path} is not served")

    def requests_to(self, method: str, path: str | None = None) -> list[Request]:
        with self.cond:
            return [r for r in self.requests if r.method == method and (path is None or r.path == path)]

    # -------------------------------------------------------------- HTTP

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                fake._serve(self, "GET")

            def do_PATCH(self) -> None:
                fake._serve(self, "PATCH")

            def do_POST(self) -> None:
                fake._serve(self, "POST")

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        headers = {k.lower(): v for k, v in handler.headers.items()}
        body = None
        length = int(headers.get("content-length") or 0)
        if length:
            raw = handler.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        request = Request(method, url.path, query, headers, body)
        with self.cond:
            self.requests.append(request)
        if headers.get("authorization") != f"Bearer {self.token}":
            return self._status(handler, request, 401, "Unauthorized", "no or wrong bearer token")
        parts = [p for p in url.path.split("/") if p]
        try:
            if method == "PATCH":
                return self._patch(handler, request, parts)
            if method == "POST":
                return self._review(handler, request)
            if parts[:1] == ["apis"] and len(parts) == 3 and parts[1] == KUEUE:
                return self._discovery(handler, request, parts[2])
            plural, version = self._collection(parts)
            if plural is None:
                return self._status(handler, request, 404, "NotFound", f"{url.path} is not served")
            if query.get("watch") in ("true", "1", "True"):
                return self._watch(handler, request, plural, version, query)
            return self._list(handler, request, plural, version, query)
        except (BrokenPipeError, ConnectionResetError):
            return None

    def _collection(self, parts: list[str]) -> tuple[str | None, str]:
        if parts[:2] == ["api", "v1"] and len(parts) == 3 and parts[2] in ("namespaces", "nodes", "pods"):
            return parts[2], "v1"
        if (len(parts) == 4 and parts[:2] == ["apis", KUEUE] and parts[2] in self.kueue_versions
                and parts[3] in PLURALS and KINDS[PLURALS[parts[3]]][2] == KUEUE):
            return parts[3], f"{KUEUE}/{parts[2]}"
        return None, ""

    # -------------------------------------------------------------- responses

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, request: Request, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        request.status = status
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()

    def _status(self, handler, request: Request, code: int, reason: str, message: str) -> None:
        self._send_json(handler, request, code, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                 "status": "Failure", "message": message, "reason": reason,
                                                 "code": code})

    def _discovery(self, handler, request: Request, version: str) -> None:
        if version not in self.kueue_versions:
            return self._status(handler, request, 404, "NotFound", f"{KUEUE}/{version} is not served")
        resources = []
        for kind, (plural, namespaced, group) in KINDS.items():
            if group == KUEUE:
                resources.append({"name": plural, "namespaced": namespaced, "kind": kind,
                                  "verbs": ["get", "list", "watch", "patch"]})
                resources.append({"name": f"{plural}/status", "namespaced": namespaced, "kind": kind,
                                  "verbs": ["get", "patch"]})
        return self._send_json(handler, request, 200, {"kind": "APIResourceList", "apiVersion": "v1",
                                                       "groupVersion": f"{KUEUE}/{version}", "resources": resources})

    def _list(self, handler, request: Request, plural: str, version: str, query: dict[str, str]) -> None:
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        with self.cond:
            if token:
                snapshot_id, _, offset_text = token.partition(":")
                if snapshot_id not in self.state.snapshots:
                    return self._status(handler, request, 410, "Expired", "the continue token has expired")
                rv, items = self.state.snapshots[snapshot_id]
                offset = int(offset_text)
            else:
                rv = self.state.rv
                items = [copy.deepcopy(o) for _, o in sorted(self.state.objects[plural].items())]
                snapshot_id = uuid.uuid4().hex
                self.state.snapshots[snapshot_id] = (rv, items)
                offset = 0
        page = items[offset:offset + limit] if limit else items[offset:]
        request.list_rv = rv
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and offset + limit < len(items):
            meta["continue"] = f"{snapshot_id}:{offset + limit}"
        if KINDS[PLURALS[plural]][2] == "":
            page = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page]
        return self._send_json(handler, request, 200, {"kind": f"{PLURALS[plural]}List", "apiVersion": version,
                                                       "metadata": meta, "items": page})

    @staticmethod
    def _chunk(handler, data: bytes) -> None:
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()

    @staticmethod
    def _drop(handler) -> None:
        handler.close_connection = True
        with contextlib.suppress(OSError):
            handler.connection.shutdown(socket.SHUT_RDWR)

    def _watch(self, handler, request: Request, plural: str, version: str, query: dict[str, str]) -> None:
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
        timeout = float(query.get("timeoutSeconds") or 1800)
        kind = PLURALS[plural]
        with self.cond:
            if self.watch_failures[plural]:
                code = self.watch_failures[plural].pop(0)
                return self._status(handler, request, code, "Expired" if code == 410 else "InternalError",
                                    f"watch refused with {code}")
            too_old = since < self.state.compacted.get(plural, 0)
            watch = Watch(plural, since, self.state.expired_generation[plural])
            self.open_watches.append(watch)
        request.status = 200
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.flush()
        try:
            if too_old:
                self._chunk(handler, self._error_410(since))
                self._chunk(handler, b"")
                return
            self._stream(handler, watch, kind, version, bookmarks, time.monotonic() + timeout)
        except OSError:
            return
        finally:
            with self.cond:
                self.open_watches.remove(watch)

    @staticmethod
    def _error_410(since: int) -> bytes:
        return json.dumps({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {since}", "reason": "Expired", "code": 410}}).encode() + b"\n"

    def _stream(self, handler, watch: Watch, kind: str, version: str, bookmarks: bool, deadline: float) -> None:
        last = watch.since
        last_sent = time.monotonic()
        while True:
            with self.cond:
                while True:
                    if self.closing:
                        return self._drop(handler)
                    if watch.plural in self.pending_drops:
                        watch.drop_after = self.pending_drops.pop(watch.plural)
                    if watch.plural in self.pending_stalls:
                        self.pending_stalls.discard(watch.plural)
                        watch.stalled = True
                    expired = self.state.expired_generation[watch.plural] != watch.expired_generation
                    events = [e for e in self.state.log[watch.plural] if e[0] > last]
                    now = time.monotonic()
                    bookmark_due = (bookmarks and not events and self.state.rv > last
                                    and now - last_sent >= self.bookmark_interval)
                    if watch.stalled or expired or events or bookmark_due or now >= deadline:
                        break
                    self.cond.wait(min(self.bookmark_interval, max(0.01, deadline - now)))
                bookmark_rv = self.state.rv
            if watch.stalled:
                with self.cond:
                    self.cond.wait_for(lambda: self.closing, timeout=min(30.0, max(0.0, deadline - time.monotonic())))
                return self._drop(handler)
            if expired:
                self._chunk(handler, self._error_410(last))
                self._chunk(handler, b"")
                return None
            for event_rv, event_type, obj in events:
                line = json.dumps({"type": event_type, "object": obj}).encode() + b"\n"
                if watch.drop_after == 0:
                    # half an event, then the connection goes away
                    handler.wfile.write(f"{len(line):x}\r\n".encode() + line[: len(line) // 2])
                    handler.wfile.flush()
                    return self._drop(handler)
                self._chunk(handler, line)
                last = event_rv
                last_sent = time.monotonic()
                if watch.drop_after is not None:
                    watch.drop_after -= 1
            if bookmark_due:
                self._chunk(handler, json.dumps({"type": "BOOKMARK", "object": {
                    "kind": kind, "apiVersion": version,
                    "metadata": {"resourceVersion": str(bookmark_rv)}}}).encode() + b"\n")
                last = bookmark_rv
                last_sent = time.monotonic()
            if time.monotonic() >= deadline:
                self._chunk(handler, b"")
                return None

    # -------------------------------------------------------------- PATCH

    def _patch(self, handler, request: Request, parts: list[str]) -> None:
        with self.cond:
            failures = self.patch_failures.get(request.path)
            code = failures.pop(0) if failures else None
        if code is not None:
            reason = {409: "Conflict", 422: "Invalid", 404: "NotFound"}.get(code, "InternalError")
            return self._status(handler, request, code, reason, f"injected failure {code}")
        subresource = parts[-1] if parts[-1] == "status" else ""
        core = parts[:2] == ["api", "v1"]
        if core and len(parts) in (6, 7) and parts[2] == "namespaces":
            namespace, plural, name = parts[3], parts[4], parts[5]
        elif parts[:2] == ["apis", KUEUE] and len(parts) in (7, 8) and parts[3] == "namespaces":
            namespace, plural, name = parts[4], parts[5], parts[6]
        else:
            return self._status(handler, request, 404, "NotFound", f"{request.path} is not served")
        kind = PLURALS.get(plural)
        with self.cond:
            current = self.state.objects[plural].get((namespace, name)) if kind else None
        if current is None:
            return self._status(handler, request, 404, "NotFound", f'{plural} "{name}" not found')
        content_type = request.content_type
        body = request.body if isinstance(request.body, dict) else {}
        if content_type == "application/merge-patch+json":
            patch = {"status": body.get("status")} if subresource else {k: v for k, v in body.items() if k != "status"}
            change = lambda obj: merge_patch(obj, patch)  # noqa: E731
        elif content_type == "application/strategic-merge-patch+json":
            patch = {"status": body.get("status") or {}} if subresource else {"spec": body.get("spec") or {}}
            change = lambda obj: strategic_merge_pod(obj, patch)  # noqa: E731
        else:
            return self._status(handler, request, 415, "UnsupportedMediaType", f"{content_type} is not supported")
        updated = self.update(kind, name, change, namespace=namespace)
        return self._send_json(handler, request, 200, updated)
