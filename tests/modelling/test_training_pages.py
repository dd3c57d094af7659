"""ORCA pages: staff, experts and admins only (annotators get 403: rating stays blind); start, follow, activate."""
import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from annotation.models import AuditEvent
from modelling.models import ModelVersion, Prediction, ScoringRun, TrainingRun
from modelling.services.scoring import scoring_run_execute, scoring_run_start
from modelling.services.training import model_version_register, training_config_clean
from modelling.services.workers import worker_register
from tests.factories import (
    AnnotatorFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def _login(client, user):
    user.refresh_from_db()
    client.force_login(user)


@pytest.fixture
def expert(client):
    user = UserFactory()
    user.groups.add(Group.objects.get(name="expert"))
    _login(client, user)
    return user


@pytest.fixture
def admin(client):
    user = UserFactory(is_staff=True)
    user.groups.add(Group.objects.get(name="admin"))
    _login(client, user)
    return user


def _done_run() -> TrainingRun:
    metrics = {"dev": {"unclamped": {"rho": 0.71, "tau": 0.55, "mae_mu": 0.2, "mae_var": 0.04},
                       "clamped": {"rho": 0.72, "tau": 0.56, "mae_mu": 0.19, "mae_var": 0.04}},
               "test": {"unclamped": {"rho": 0.70, "tau": 0.54, "mae_mu": 0.21, "mae_var": None},
                        "clamped": {"rho": 0.731, "tau": 0.57, "mae_mu": 0.18, "mae_var": 0.05}},
               "best_epoch": 1, "clamp_threshold": 0.01, "train_wall_s": 3.2}
    run = TrainingRun.objects.create(
        config=training_config_clean(config={}), status=TrainingRun.Status.DONE, artifact_path="/x", metrics=metrics,
        progress=[{"epoch": 1, "loss": -0.5, "dev_rho": 0.71, "dev_tau": 0.55, "dev_mae_mu": 0.2, "elapsed_s": 3}],
    )
    model_version_register(run=run)
    return run


def _urls(run_pk: int, question_pk: int) -> list[str]:
    return [
        reverse("modelling:training_runs"), reverse("modelling:training_run_new"),
        reverse("modelling:training_run", args=[run_pk]), reverse("modelling:items"),
        reverse("modelling:item", args=[question_pk]),
    ]


def test_annotators_get_403_on_every_orca_page_and_action(client):
    run, question = _done_run(), QuestionFactory()
    CandidateAnswerFactory(question_version=question.current_version)
    _login(client, AnnotatorFactory())
    for url in _urls(run.pk, question.pk):
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("modelling:training_run_activate", args=[run.pk])).status_code == 403
    assert client.post(reverse("modelling:training_run_new"), {}).status_code == 403
    assert not ModelVersion.objects.filter(is_active=True).exists()


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(reverse("modelling:training_runs"))
    assert response.status_code == 302 and "login" in response["Location"]


def test_runs_list_compares_metrics_with_the_papers_figures(client, admin):
    run = _done_run()
    html = client.get(reverse("modelling:training_runs")).content.decode()
    assert "Gemma3-270M" in html and "0.844" in html and "0.721" in html and "0.121" in html
    assert "OLMo2-1B" in html and "0.895" in html and "0.784" in html and "0.094" in html
    assert f"#{run.pk}" in html and "0.731" in html  # test clamped rho of the run
    assert reverse("modelling:training_run_activate", args=[run.pk]) in html


def test_a_run_queued_for_over_a_minute_asks_whether_a_worker_runs(client, expert):
    from datetime import timedelta

    from django.utils import timezone

    waiting = TrainingRun.objects.create(config=training_config_clean(config={}))
    TrainingRun.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(minutes=3))
    TrainingRun.objects.create(config=training_config_clean(config={}))  # just queued: a worker may take it now
    html = client.get(reverse("modelling:training_runs")).content.decode()
    assert html.count("no worker has started it") == 1 and "Queued 3\xa0minutes ago" in html
    assert "<code>celery -A config worker -Q default,gpu</code>" in html


def test_admins_start_a_run_from_the_form(client, admin, django_capture_on_commit_callbacks):
    RatingFactory(candidate=CandidateAnswerFactory(lalm=LALMFactory(name="M1_0")))
    RatingFactory(candidate=CandidateAnswerFactory(lalm=LALMFactory(name="M2_3")))
    form = client.get(reverse("modelling:training_run_new"))
    assert 'value="minilm"' in form.content.decode() and "M2_3" in form.content.decode()
    assert 'name="freeze_layers" value="2"' in form.content.decode()  # the recipe's defaults are prefilled
    data = {"base_model": "minilm", "head": "multinomial", "pooling": "auto", "epochs": 2, "lr": 5e-5,
            "batch_size": 8, "freeze_layers": 0, "lora_rank": 0, "var_weight": 0, "max_length": 128,
            "rationale": "on", "question": "on", "device": "cpu",
            "split_kind": "held_out_lalms", "seed": 7, "held_out_lalms": ["M2_3"]}
    with django_capture_on_commit_callbacks(execute=False):  # queue only; training is tested end to end elsewhere
        response = client.post(reverse("modelling:training_run_new"), data)
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("modelling:training_run", args=[run.pk])
    assert run.status == TrainingRun.Status.QUEUED and run.created_by == admin
    assert run.config["head"] == "multinomial" and run.config["epochs"] == 2 and run.config["transcript"] is False
    assert (run.config["freeze_layers"], run.config["var_weight"], run.config["rationale"]) == (0, 0.0, True)
    assert run.split_kind == "held_out_lalms" and run.held_out_lalms == ["M2_3"] and run.split_seed == 7


def test_the_form_refuses_holding_out_every_lalm(client, admin):
    RatingFactory(candidate=CandidateAnswerFactory(lalm=LALMFactory(name="only")))
    data = {"base_model": "minilm", "head": "beta", "pooling": "auto", "epochs": 1, "lr": 1e-4, "batch_size": 8,
            "freeze_layers": 2, "lora_rank": 0, "var_weight": 5, "max_length": 64, "device": "cpu",
            "split_kind": "held_out_lalms", "seed": 1, "held_out_lalms": ["only"]}
    response = client.post(reverse("modelling:training_run_new"), data)
    assert response.status_code == 200 and "Leave at least one LALM" in response.content.decode()
    assert not TrainingRun.objects.exists()


def test_the_run_page_polls_while_running_and_htmx_gets_only_the_progress_partial(client, expert):
    run = TrainingRun.objects.create(
        config=training_config_clean(config={}), status=TrainingRun.Status.RUNNING, steps_done=5, steps_total=20,
        progress=[{"epoch": 1, "loss": 1.25, "dev_rho": 0.4, "dev_tau": 0.3, "dev_mae_mu": 0.25, "elapsed_s": 9}],
    )
    url = reverse("modelling:training_run", args=[run.pk])
    page = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in page and "<svg" in page and "step 5 of 20" in page
    partial = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith('<div id="run-progress"') and "<html" not in partial
    assert "1.2500" in partial and "0.4000" in partial
    run.status = TrainingRun.Status.DONE
    run.save()
    assert "every 2s" not in client.get(url, headers={"HX-Request": "true"}).content.decode()


def test_the_activate_button_queues_a_checking_scoring_job_and_both_pages_show_it(client, admin):
    run = _done_run()
    response = client.post(reverse("modelling:training_run_activate", args=[run.pk]))
    assert response.status_code == 302
    job = ScoringRun.objects.get()
    assert job.activate and job.model_version == run.model_version and job.created_by == admin
    assert not ModelVersion.objects.filter(is_active=True).exists()  # only once the worker's check passed
    event = AuditEvent.objects.get(action="model.activate.start")
    assert event.actor == admin and event.new == {"scoring_run": job.pk, "name": run.model_version.name}
    page = client.get(reverse("modelling:training_run", args=[run.pk])).content.decode()
    assert f"Activation (scoring job #{job.pk}): Queued" in page
    assert reverse("modelling:training_run_activate", args=[run.pk]) not in page  # no second activation meanwhile
    runs = client.get(reverse("modelling:training_runs")).content.decode()
    assert "check, activate and score" in runs and 'hx-trigger="every 2s"' in runs
    partial = client.get(reverse("modelling:training_runs") + "?part=scoring", headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<div id="scoring-jobs"')


def test_a_failed_activation_shows_why_on_the_run_page(client, admin):
    run = _done_run()  # its artifact folder /x does not exist
    job = scoring_run_start(run=run, activate=True, user=admin)
    scoring_run_execute(run_id=job.pk)
    page = client.get(reverse("modelling:training_run", args=[run.pk])).content.decode()
    assert "Failed" in page and "not activated: /x is not an ORCA model folder" in page
    assert reverse("modelling:training_run_activate", args=[run.pk]) in page  # it can be tried again
    assert not ModelVersion.objects.filter(is_active=True).exists()


def test_the_form_offers_the_gpu_recipe_only_while_a_cuda_worker_is_alive(client, admin):
    url = reverse("modelling:training_run_new")
    page = client.get(url).content.decode()
    assert 'value="cpu-minilm"' in page and 'value="gpu-gemma3-270m"' not in page
    response = client.get(url, {"preset": "gpu-gemma3-270m"})
    page = response.content.decode()
    assert "needs a worker with a CUDA GPU" in page and 'name="base_model" value="minilm"' in page

    worker_register(hostname="gpu@host", queues=["gpu"], cuda=False)
    assert 'value="gpu-gemma3-270m"' not in client.get(url).content.decode()  # a worker, but no CUDA there
    worker_register(hostname="gpu@host", queues=["gpu"], cuda=True, device_name="NVIDIA H100")
    page = client.get(url, {"preset": "gpu-gemma3-270m"}).content.decode()
    assert 'value="gpu-gemma3-270m" selected' in page
    for field, value in (("base_model", "gemma3-270m"), ("lora_rank", "16"), ("max_length", "256"), ("lr", "0.0002")):
        assert f'name="{field}" value="{value}"' in page, field
    assert re.search(r'<input[^>]*name="rationale"[^>]*checked', page)


def test_experts_read_runs_but_cannot_start_activate_or_cancel_them(client, expert):
    run = _done_run()
    html = client.get(reverse("modelling:training_runs")).content.decode()
    assert f"#{run.pk}" in html and reverse("modelling:training_run_activate", args=[run.pk]) not in html
    assert reverse("modelling:training_run_new") not in html
    assert client.get(reverse("modelling:training_run", args=[run.pk])).status_code == 200
    assert client.get(reverse("modelling:training_run_new")).status_code == 403
    assert client.post(reverse("modelling:training_run_new"), {}).status_code == 403
    assert client.post(reverse("modelling:training_run_activate", args=[run.pk])).status_code == 403
    assert client.post(reverse("modelling:training_run_cancel", args=[run.pk])).status_code == 403
    assert not ModelVersion.objects.filter(is_active=True).exists()


def test_the_item_page_shows_mu_plus_minus_sigma_and_the_human_ratings(client, expert):
    run = _done_run()
    question = QuestionFactory(external_id="KYGj2xHDQAg")
    candidate = CandidateAnswerFactory(question_version=question.current_version, text="A football stadium")
    RatingFactory(candidate=candidate, score=5)
    RatingFactory(candidate=candidate, score=4)
    from modelling.services.registry import model_version_activate

    version = model_version_activate(run=run)
    Prediction.objects.create(candidate=candidate, model_version=version, mu=0.875, variance=0.01, alpha=7, beta=1)
    html = client.get(reverse("modelling:item", args=[question.pk])).content.decode()
    assert "A football stadium" in html and "0.875 ± 0.100" in html and "5, 4" in html and "0.875" in html
    items = client.get(reverse("modelling:items")).content.decode()
    assert "KYGj2xHDQAg" in items and "0.100" in items


def test_the_agreement_page_links_to_the_orca_pages(client, expert):
    html = client.get(reverse("modelling:agreement")).content.decode()
    assert reverse("modelling:training_runs") in html and reverse("modelling:items") in html


def test_a_run_that_fell_back_to_the_cpu_says_so_on_its_page(client, expert):
    run = TrainingRun.objects.create(
        config=training_config_clean(config={"base_model": "gemma3-270m", "device": "cuda", "lora_rank": 16}),
        status=TrainingRun.Status.DONE, artifact_path="/x", metrics={"device": "cpu", "train_wall_s": 1.0},
    )
    page = client.get(reverse("modelling:training_run", args=[run.pk])).content.decode()
    assert "LoRA rank 16" in page and "cuda (ran on cpu: no CUDA on its worker)" in page
