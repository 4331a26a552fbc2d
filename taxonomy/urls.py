from django.urls import path

from taxonomy import views

urlpatterns = [
    path("codebooks/", views.codebook_list, name="codebook_list"),
    path("codebooks/<int:pk>/", views.codebook_detail, name="codebook_detail"),
    path("codebooks/<int:pk>/types/<str:code>/", views.type_detail, name="type_detail"),
    path("codebooks/<int:pk>/diff/", views.codebook_diff_view, name="codebook_diff"),
]
