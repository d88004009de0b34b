"""HTTP endpoints of the core app."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasweb.core.selectors import health_report


class HealthCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    detail = serializers.CharField(help_text="the vendor or transport when ok, else the error")


class HealthApi(APIView):
    """200 when the database and the broker answer, 503 otherwise; the body says which failed."""

    # Probes carry no credentials and must not depend on sessions (the database may be down).
    authentication_classes = ()
    permission_classes = (AllowAny,)
    renderer_classes = (JSONRenderer,)

    class OutputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=["ok", "unavailable"])
        database = HealthCheckSerializer()
        broker = HealthCheckSerializer()
        last_heartbeat = serializers.DateTimeField(
            allow_null=True, help_text="when a worker last ran the heartbeat task (informational)"
        )

    @extend_schema(operation_id="healthz", responses={200: OutputSerializer, 503: OutputSerializer})
    def get(self, request: Request) -> Response:
        report = health_report()
        data = self.OutputSerializer(
            {
                "status": "ok" if report.ok else "unavailable",
                "database": report.database,
                "broker": report.broker,
                "last_heartbeat": report.last_heartbeat,
            }
        ).data
        return Response(data, status=status.HTTP_200_OK if report.ok else status.HTTP_503_SERVICE_UNAVAILABLE)
