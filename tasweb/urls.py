"""URL configuration. Apps add their API routes under /api/ and their pages at the root."""

from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from tasweb.api.apis import MetricsApi
from tasweb.api.urls import api_root, visibility_urls
from tasweb.api.urls import v1 as api_v1
from tasweb.core.apis import HealthApi, LivenessApi
from tasweb.core.login import LoginView, token_login
from tasweb.core.middleware import with_policy
from tasweb.core.views import favicon

api_reference = with_policy("TAS_API_REFERENCE_CONTENT_SECURITY_POLICY")


class SchemaView(SpectacularAPIView):
    """The OpenAPI document of the one API version there is: a `?version=` parameter is not
    read (drf-spectacular would echo it into info.version and the Content-Disposition
    header, where a newline is a server error)."""

    def _get_version_parameter(self, request):
        return None

urlpatterns = [
    path("healthz", HealthApi.as_view(), name="healthz"),
    path("healthz/live", LivenessApi.as_view(), name="healthz-live"),
    path("metrics", MetricsApi.as_view(), name="metrics"),
    path("favicon.ico", favicon, name="favicon"),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/login/token/", token_login, name="login-token"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", api_reference(SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/redoc/", api_reference(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("api/v1/", include((api_v1, "api"))),
    path("api/", include(api_root)),  # /api/ itself, and a JSON 404 for any other /api/ path
    # Kueue's visibility API at the paths its clients call (see tasweb/api/visibility.py)
    path("", include((visibility_urls, "visibility"))),
    path("", include("tasweb.dashboard.urls")),
]
