from django.urls import path

from annotation.teams import views

app_name = "team"

urlpatterns = [
    path("users/", views.user_list, name="users"),
    path("users/<int:user_pk>/role/", views.user_role, name="user-role"),
    path("users/<int:user_pk>/active/", views.user_active, name="user-active"),
    path("users/<int:user_pk>/link/", views.user_link, name="user-link"),
    path("benchmarks/", views.team_list, name="teams"),
    path("benchmarks/<int:benchmark_pk>/", views.team_set, name="team-set"),
    path("invite/", views.invite, name="invite"),
]
