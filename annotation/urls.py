from django.urls import path

from annotation import views

app_name = "annotation"

urlpatterns: list = [
    path("", views.home, name="home"),
    path("rate/next/", views.next_item, name="next"),
    path("rate/<int:assignment_pk>/submit/", views.rate, name="rate"),
    path("rate/<int:assignment_pk>/skip/", views.skip, name="skip"),
    path("audio/<int:clip_pk>/", views.audio, name="audio"),
]
