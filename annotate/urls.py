from django.urls import path

from annotate.views import (
    accounts,
    adjudication,
    coding,
    coding_settings,
    episodes,
    health,
    jobs,
    members,
    queue,
    studies,
    tokens,
)
from annotate.views import analysis as analysis_views
from annotate.views import codebook_data as codebook_data_views
from annotate.views import codebook_moves as codebook_move_views
from annotate.views import documents as document_views
from annotate.views import incidents as incident_views
from annotate.views import reports as report_views
from annotate.views import suggestions as suggestion_views
from annotate.views import traces as trace_views
from annotate.views import webhook_settings as webhook_views

urlpatterns = [
    path("", studies.study_list, name="study_list"),
    path("healthz", health.healthz, name="healthz"),
    path("studies/<slug:slug>/", studies.study_overview, name="study_overview"),
    path("new-study/", studies.study_new, name="study_new"),
    path("invite/<str:token>/", accounts.invitation_accept_view, name="invitation_accept"),
    path("account/", accounts.account_page, name="account"),
    path("studies/<slug:slug>/members/", members.study_members, name="study_members"),
    path("studies/<slug:slug>/members/<int:pk>/", members.member_update_view, name="member_update"),
    path("studies/<slug:slug>/members/<int:pk>/remove/", members.member_remove_view, name="member_remove"),
    path("studies/<slug:slug>/invitations/<int:pk>/revoke/", members.invitation_revoke_view, name="invitation_revoke"),
    path("studies/<slug:slug>/next/", queue.coding_next, name="coding_next"),
    path("studies/<slug:slug>/progress/mine/", queue.coding_progress, name="coding_progress"),
    path("studies/<slug:slug>/episodes/<int:pk>/", episodes.episode_detail, name="episode_detail"),
    path("studies/<slug:slug>/episodes/<int:pk>/code/", coding.coding_page, name="coding_page"),
    path("studies/<slug:slug>/episodes/<int:pk>/claim/", coding.coding_claim, name="coding_claim"),
    path("studies/<slug:slug>/episodes/<int:pk>/skip/", queue.coding_skip, name="coding_skip"),
    path("studies/<slug:slug>/episodes/<int:pk>/leave/", queue.coding_leave, name="coding_leave"),
    path("studies/<slug:slug>/leases/<int:pk>/release/", queue.lease_release_view, name="lease_release"),
    path("studies/<slug:slug>/episodes/<int:pk>/adjudicate/", adjudication.adjudication_page, name="adjudication_page"),
    path("studies/<slug:slug>/adjudicate/", adjudication.adjudication_list, name="adjudication_list"),
    path("studies/<slug:slug>/settings/coding/", coding_settings.coding_settings, name="study_coding_settings"),
    path("studies/<slug:slug>/settings/codebook/", codebook_move_views.codebook_version, name="codebook_version"),
    path(
        "studies/<slug:slug>/settings/codebook/<int:pk>/revert/",
        codebook_move_views.codebook_revert,
        name="codebook_revert",
    ),
    path("studies/<slug:slug>/settings/webhook/", webhook_views.webhook_settings, name="study_webhook_settings"),
    path(
        "studies/<slug:slug>/settings/webhook/test/<str:event_id>/",
        webhook_views.webhook_test_result,
        name="study_webhook_test_result",
    ),
    path("studies/<slug:slug>/documents/", document_views.document_list, name="document_list"),
    path("studies/<slug:slug>/documents/<int:pk>/", document_views.document_detail, name="document_detail"),
    path(
        "studies/<slug:slug>/documents/<int:pk>/episodes/",
        document_views.document_episode_add,
        name="document_episode_add",
    ),
    path(
        "studies/<slug:slug>/documents/<int:pk>/episodes/<int:episode_pk>/split/",
        document_views.document_episode_split,
        name="document_episode_split",
    ),
    path(
        "studies/<slug:slug>/documents/<int:pk>/episodes/<int:episode_pk>/delete/",
        document_views.document_episode_delete,
        name="document_episode_delete",
    ),
    path("studies/<slug:slug>/import/", document_views.study_import, name="study_import"),
    path("studies/<slug:slug>/traces/import/", trace_views.trace_upload, name="trace_upload"),
    path("studies/<slug:slug>/documents/<int:pk>/trace/", trace_views.trace_steps, name="trace_steps"),
    path(
        "studies/<slug:slug>/documents/<int:pk>/trace/<int:index>/<str:part>/",
        trace_views.trace_step_text,
        name="trace_step_text",
    ),
    path("jobs/<int:pk>/", jobs.job_status, name="job_status"),
    path("studies/<slug:slug>/jobs/", jobs.study_job_list, name="study_job_list"),
    path("studies/<slug:slug>/analysis/", analysis_views.analysis_page, name="analysis_page"),
    path("studies/<slug:slug>/analysis/run/", analysis_views.analysis_run, name="analysis_run"),
    path("studies/<slug:slug>/analysis/report/", report_views.report_run, name="report_run"),
    path("studies/<slug:slug>/analysis/report/<int:pk>.zip", report_views.report_download, name="report_download"),
    path(
        "studies/<slug:slug>/analysis/cell/<str:kind>/<str:stage>/<str:capability>/",
        analysis_views.analysis_cell,
        name="analysis_cell",
    ),
    path("studies/<slug:slug>/analysis/<str:name>.<str:fmt>", analysis_views.analysis_figure, name="analysis_figure"),
    path("studies/<slug:slug>/agreement/", analysis_views.agreement_page, name="agreement_page"),
    path("studies/<slug:slug>/coverage/", analysis_views.coverage_page, name="coverage_page"),
    path("studies/<slug:slug>/agreement/run/", analysis_views.agreement_run, name="agreement_run"),
    path("studies/<slug:slug>/coverage/run/", analysis_views.coverage_run, name="coverage_run"),
    path("studies/<slug:slug>/incidents/", incident_views.triage_board, name="triage_board"),
    path("studies/<slug:slug>/incidents/bulk/", incident_views.incident_bulk, name="incident_bulk"),
    path("studies/<slug:slug>/incidents/<int:pk>/", incident_views.incident_detail, name="incident_detail"),
    path("studies/<slug:slug>/incidents/<int:pk>/move/", incident_views.incident_move_view, name="incident_move"),
    path("studies/<slug:slug>/incidents/<int:pk>/code/", incident_views.incident_code, name="incident_code"),
    path("studies/<slug:slug>/suggestions/", suggestion_views.suggestion_quality_page, name="suggestion_quality_page"),
    path("studies/<slug:slug>/suggestions/run/", suggestion_views.suggestion_batch, name="suggestion_batch"),
    path("studies/<slug:slug>/suggestions/retrain/", suggestion_views.suggestion_retrain, name="suggestion_retrain"),
    path("studies/<slug:slug>/suggestions/audit/", suggestion_views.suggestion_audit, name="suggestion_audit"),
    path(
        "studies/<slug:slug>/episodes/<int:pk>/suggestions/",
        suggestion_views.suggestion_panel,
        name="suggestion_panel",
    ),
    path(
        "studies/<slug:slug>/episodes/<int:pk>/suggestions/first-choice/",
        suggestion_views.suggestion_first_choice,
        name="suggestion_first_choice",
    ),
    path(
        "studies/<slug:slug>/suggestions/<int:pk>/reject/",
        suggestion_views.suggestion_reject_view,
        name="suggestion_reject",
    ),
    path("codebooks/<int:pk>/coding-<str:stamp>.js", codebook_data_views.codebook_data_js, name="codebook_data_js"),
    path("profile/tokens/", tokens.profile_tokens, name="profile_tokens"),
    path("profile/tokens/<int:pk>/revoke/", tokens.profile_token_revoke, name="profile_token_revoke"),
]
