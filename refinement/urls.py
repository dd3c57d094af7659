from django.urls import path

app_name = "refinement"

urlpatterns: list = []
