"""Workers announce themselves: a real Celery worker registers its queues and whether it has CUDA when it starts,
refreshes that while it runs, and removes it on a clean shutdown (modelling/services/workers.py).

Needs Redis at 127.0.0.1:6379 and ``DATABASE_URL`` pointing at PostgreSQL (shared with the worker); skips with the
reason otherwise.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from modelling.models import WorkerNode
from modelling.services.workers import cuda_worker_alive, orca_queue, workers_alive
from tests.annotation.test_jobs_worker import redis_reachable, wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_registers_its_queues_and_cuda_and_leaves_on_shutdown(tmp_path, settings):
    if not redis_reachable():
        pytest.skip("Redis is not reachable at 127.0.0.1:6379 (the worker test needs a real broker)")
    if connection.vendor != "postgresql":
        pytest.skip("the worker test needs PostgreSQL shared with the worker: set DATABASE_URL=postgres://...")
    import torch

    db = connection.settings_dict
    (tmp_path / "worker_settings.py").write_text("from config.settings.test import *  # noqa\n"
                                                 "CELERY_TASK_ALWAYS_EAGER = False\n")
    env = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "worker_settings", "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}",
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL") or "redis://127.0.0.1:6379/7",
    }
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default,orca-gpu-test", "-n",
         "probe@%h", "--pool", "solo", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
        cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: WorkerNode.objects.filter(hostname__startswith="probe@").exists(), timeout_s=240,
                 what="the worker to register", log=log)
        node = WorkerNode.objects.get(hostname__startswith="probe@")
        assert node.queues == ["default", "orca-gpu-test"] and node.cuda is torch.cuda.is_available()
        assert node.versions["torch"] == torch.__version__ and node.versions["transformers"]
        assert node in workers_alive() and cuda_worker_alive() is node.cuda
        settings.ORCA_TRAIN_QUEUE = "orca-gpu-test"
        assert orca_queue() == ("orca-gpu-test", "")  # a live worker serves it: no fallback
        worker.send_signal(signal.SIGTERM)  # warm shutdown
        worker.wait(timeout=60)
        assert not WorkerNode.objects.filter(hostname__startswith="probe@").exists()
        queue, note = orca_queue()
        assert queue == "default" and "no worker serving the 'orca-gpu-test' queue" in note
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
