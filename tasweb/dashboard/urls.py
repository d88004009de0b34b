"""The dashboard's pages, at the root of the site."""

from django.urls import path

from tasweb.dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("topology/", views.topology, name="topology"),
    path("workloads/", views.workloads, name="workloads"),
    path("workloads/<str:namespace>/<str:name>/", views.workload, name="workload"),
    path("workloads/<str:namespace>/<str:name>/why-pending/", views.why_pending, name="why-pending"),
    path("history/", views.history, name="history"),
    path("queues/", views.queues, name="queues"),
    path("comparison/", views.comparison, name="comparison"),
]
