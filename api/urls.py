"""The REST API, versioned under /api/v1/. Each area registers its viewsets and paths here."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

router = DefaultRouter()

# Plain paths under /api/v1/ (for endpoints that are not viewsets).
v1_paths = []

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("v1/", include(v1_paths)),
    path("v1/", include(router.urls)),
]
