from django.urls import path

from .views import health, jobs, members, studies, tokens

urlpatterns = [
    path("", studies.study_list, name="study_list"),
    path("healthz", health.healthz, name="healthz"),
    path("studies/<slug:slug>/", studies.study_overview, name="study_overview"),
    path("studies/<slug:slug>/members/", members.study_members, name="study_members"),
    path("jobs/<int:pk>/", jobs.job_status, name="job_status"),
    path("profile/tokens/", tokens.profile_tokens, name="profile_tokens"),
    path("profile/tokens/<int:pk>/revoke/", tokens.profile_token_revoke, name="profile_token_revoke"),
]
