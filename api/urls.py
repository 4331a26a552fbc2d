"""The REST API, versioned under /api/v1/. Each area registers its viewsets and paths here."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from api.views import analysis, codebooks, exports, incidents, jobs, reports, studies, suggestions, traces
from api.views.docs import ApiDocsView
from api.views.errors import api_not_found

router = DefaultRouter()
router.register("codebooks", codebooks.CodebookViewSet, basename="codebook")
router.register("studies", studies.StudyViewSet, basename="study")
router.register("incidents", incidents.IncidentViewSet, basename="incident")

# Plain paths under /api/v1/ (for endpoints that are not viewsets).
v1_paths = [
    path("studies/<slug:slug>/documents/", studies.DocumentList.as_view(), name="api-documents"),
    path("studies/<slug:slug>/episodes/", studies.EpisodeList.as_view(), name="api-episodes"),
    path("studies/<slug:slug>/codings/", studies.CodingList.as_view(), name="api-codings"),
    path("studies/<slug:slug>/import/", jobs.ImportStart.as_view(), name="api-import"),
    path("studies/<slug:slug>/suggest/", jobs.SuggestStart.as_view(), name="api-suggest"),
    path("studies/<slug:slug>/analysis/", jobs.AnalysisStart.as_view(), name="api-analysis"),
    path("studies/<slug:slug>/traces/", traces.TraceImport.as_view(), name="api-traces"),
    path("studies/<slug:slug>/traces/<int:pk>/steps/", traces.TraceSteps.as_view(), name="api-trace-steps"),
    path("jobs/<int:pk>/", jobs.JobDetail.as_view(), name="api-job"),
    path("studies/<slug:slug>/matrix/", analysis.MatrixView.as_view(), name="api-matrix"),
    path("studies/<slug:slug>/agreement/", analysis.AgreementView.as_view(), name="api-agreement"),
    path("studies/<slug:slug>/coverage/", analysis.CoverageView.as_view(), name="api-coverage"),
    path("studies/<slug:slug>/report/", reports.ReportView.as_view(), name="api-report"),
    path("studies/<slug:slug>/export/", exports.ExportView.as_view(), name="api-export"),
    path(
        "studies/<slug:slug>/suggestions/quality/",
        suggestions.SuggestionQualityView.as_view(),
        name="api-suggestion-quality",
    ),
    path("studies/<slug:slug>/suggestions/exposure/", suggestions.ExposureReportView.as_view(), name="api-exposure"),
    path("studies/<slug:slug>/suggestions/audits/", suggestions.SuggesterAuditView.as_view(), name="api-audits"),
    path("jobs/<int:pk>/file/", exports.JobFile.as_view(), name="api-job-file"),
]

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file of its own: no inline script, so the site's CSP holds.
    path("docs/", ApiDocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("v1/", include(v1_paths)),
    path("v1/", include(router.urls)),
    # Last: any other /api/ URL is a JSON 404 (with DEBUG on too, where Django's handler404 is not used).
    path("<path:unknown>", api_not_found, name="api-not-found"),
]
