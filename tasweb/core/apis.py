"""HTTP endpoints of the core app."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasweb.api.authentication import TokenAuthentication
from tasweb.core.selectors import HealthReport, dependencies_report, health_report


class HealthCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    detail = serializers.CharField(help_text="the vendor, transport or age when ok, else the error")


class HealthOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "unavailable"])
    database = HealthCheckSerializer(required=False, help_text="staff callers only (or with DEBUG on)")
    broker = HealthCheckSerializer(required=False, help_text="staff callers only (or with DEBUG on)")
    work = HealthCheckSerializer(required=False, help_text="a heartbeat or a scheduling pass completed lately; "
                                                           "staff callers only (or with DEBUG on)")
    last_heartbeat = serializers.DateTimeField(allow_null=True, required=False,
                                               help_text="when a worker last ran the heartbeat task")
    last_pass = serializers.DateTimeField(allow_null=True, required=False,
                                          help_text="when the last scheduling pass finished")


class HealthApi(APIView):
    """200 when the database and the broker answer and a worker has completed a heartbeat or
    a scheduling pass within TAS_HEALTH_MAX_AGE_SECONDS, 503 otherwise. Anonymous callers
    get the status alone: the details name hosts, ports and errors, for staff only."""

    # Probes carry no credentials; a staff member's token or session shows the details, and
    # a failure to authenticate (the database may be down) only means "anonymous".
    authentication_classes = (TokenAuthentication, SessionAuthentication)
    permission_classes = (AllowAny,)
    renderer_classes = (JSONRenderer,)
    report = staticmethod(health_report)

    def perform_authentication(self, request: Request) -> None:
        """Lazily, in `shows_details`: a probe must answer even when authenticating cannot."""

    @staticmethod
    def shows_details(request: Request) -> bool:
        if settings.DEBUG:
            return True
        try:
            user = request.user
        except Exception:  # bad credentials or an unreachable database: anonymous
            return False
        return bool(user and user.is_authenticated and user.is_staff)

    @extend_schema(operation_id="healthz", responses={200: HealthOutputSerializer, 503: HealthOutputSerializer})
    def get(self, request: Request) -> Response:
        report: HealthReport = self.report()
        body: dict = {"status": "ok" if report.ok else "unavailable"}
        if self.shows_details(request):
            body = HealthOutputSerializer({**body, "database": report.database, "broker": report.broker,
                                           "work": report.work, "last_heartbeat": report.last_heartbeat,
                                           "last_pass": report.last_pass}).data
        return Response(body, status=status.HTTP_200_OK if report.ok else status.HTTP_503_SERVICE_UNAVAILABLE)


class LivenessApi(HealthApi):
    """200 when the database and the broker answer: whether this web process can serve.
    Unlike /healthz it does not need a worker, so a stack can start its workers after it."""

    report = staticmethod(dependencies_report)

    @extend_schema(operation_id="healthz_live", responses={200: HealthOutputSerializer, 503: HealthOutputSerializer})
    def get(self, request: Request) -> Response:
        return super().get(request)
