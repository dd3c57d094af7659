from django.urls import path

from . import views

app_name = "modelling"

urlpatterns = [
    path("agreement/", views.agreement_page, name="agreement"),
]
