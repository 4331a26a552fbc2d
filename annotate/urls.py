from django.urls import path

from .views import adjudication, coding, coding_settings, episodes, health, jobs, members, queue, studies, tokens

urlpatterns = [
    path("", studies.study_list, name="study_list"),
    path("healthz", health.healthz, name="healthz"),
    path("studies/<slug:slug>/", studies.study_overview, name="study_overview"),
    path("studies/<slug:slug>/members/", members.study_members, name="study_members"),
    path("studies/<slug:slug>/next/", queue.coding_next, name="coding_next"),
    path("studies/<slug:slug>/episodes/<int:pk>/", episodes.episode_detail, name="episode_detail"),
    path("studies/<slug:slug>/episodes/<int:pk>/code/", coding.coding_page, name="coding_page"),
    path("studies/<slug:slug>/episodes/<int:pk>/skip/", queue.coding_skip, name="coding_skip"),
    path("studies/<slug:slug>/episodes/<int:pk>/adjudicate/", adjudication.adjudication_page, name="adjudication_page"),
    path("studies/<slug:slug>/adjudicate/", adjudication.adjudication_list, name="adjudication_list"),
    path("studies/<slug:slug>/settings/coding/", coding_settings.coding_settings, name="study_coding_settings"),
    path("jobs/<int:pk>/", jobs.job_status, name="job_status"),
    path("profile/tokens/", tokens.profile_tokens, name="profile_tokens"),
    path("profile/tokens/<int:pk>/revoke/", tokens.profile_token_revoke, name="profile_token_revoke"),
]
