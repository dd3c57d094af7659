"""Which Celery workers are alive, which queues they serve and whether they have a CUDA GPU; and where ORCA's jobs go.

Every worker announces itself when it starts (Celery's ``worker_ready`` signal, connected in ``ModellingConfig.ready``)
and refreshes its ``WorkerNode`` row every :data:`SEEN_EVERY_S` seconds from a daemon thread; on a clean shutdown it
removes the row. A row not refreshed for :data:`ALIVE_WITHIN_S` seconds is a worker gone (killed, machine off).
Whether torch sees a CUDA device is asked in a short child process, never in the worker itself: initialising CUDA in
the parent of a prefork pool breaks CUDA in its forked children.

ORCA's training runs, cross-fits, checkpoint imports and scoring jobs go to ``ORCA_TRAIN_QUEUE`` when one is set
and a live worker serves it, else to the default queue with a note in the job's log (:func:`orca_queue`); a worker
asked for ``cuda`` that has none trains and scores on its CPU, again with a note (:func:`orca_device`).
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from modelling.models import WorkerNode

logger = logging.getLogger(__name__)

#: Seconds between a worker's refreshes of its row, and the age after which a row counts as a worker gone.
SEEN_EVERY_S = 60
ALIVE_WITHIN_S = 180
#: Asked in a child process (see the module docstring); prints one JSON object.
_CUDA_PROBE = (
    "import json, torch, transformers\n"
    "ok = torch.cuda.is_available()\n"
    "print(json.dumps({'cuda': ok, 'device_name': torch.cuda.get_device_name(0) if ok else '',\n"
    "                  'versions': {'torch': torch.__version__, 'transformers': transformers.__version__}}))\n"
)


def cuda_probe(timeout_s: float = 180.0) -> dict:
    """``{cuda, device_name, versions}`` as torch sees them in a fresh Python process (``cuda`` False and the error
    in ``versions`` when torch cannot be imported or the probe times out).

    A machine without an NVIDIA device node (``/dev/nvidia*``: every CPU-only machine) answers ``cuda`` False at
    once, without starting Python and importing torch (seconds of CPU on every worker start)."""
    if not any(Path("/dev").glob("nvidia*")):
        from modelling.orca.integrity import environment  # library versions from metadata, nothing imported

        return {"cuda": False, "device_name": "", "versions": environment()}
    try:
        done = subprocess.run([sys.executable, "-c", _CUDA_PROBE], capture_output=True, text=True, timeout=timeout_s)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError, OSError) as exc:
        return {"cuda": False, "device_name": "", "versions": {"probe_error": f"{type(exc).__name__}: {exc}"}}


def worker_register(*, hostname: str, queues: list[str], cuda: bool, device_name: str = "",
                    versions: dict | None = None) -> WorkerNode:
    """Record (or refresh) a worker that has started: its node name, the queues it consumes, whether it has CUDA."""
    now = timezone.now()
    node, _ = WorkerNode.objects.update_or_create(
        hostname=hostname,
        defaults={"queues": sorted(queues), "cuda": cuda, "device_name": device_name, "versions": versions or {},
                  "started_at": now, "last_seen_at": now},
    )
    return node


def worker_seen(*, hostname: str) -> bool:
    """Refresh a worker's sign of life; False when its row is gone (then it registers again)."""
    return WorkerNode.objects.filter(hostname=hostname).update(last_seen_at=timezone.now()) == 1


def worker_unregister(*, hostname: str) -> None:
    """Forget a worker that shut down cleanly."""
    WorkerNode.objects.filter(hostname=hostname).delete()


def workers_alive(*, now=None) -> list[WorkerNode]:
    """Workers seen within :data:`ALIVE_WITHIN_S` seconds, by host name."""
    cutoff = (now or timezone.now()) - timedelta(seconds=ALIVE_WITHIN_S)
    return list(WorkerNode.objects.filter(last_seen_at__gte=cutoff))


def cuda_worker_alive() -> bool:
    """True when a live worker has a CUDA device (the training form then offers the GPU presets)."""
    return any(node.cuda for node in workers_alive())


def orca_queue() -> tuple[str | None, str]:
    """``(queue, note)`` for an ORCA job being queued now.

    No ``ORCA_TRAIN_QUEUE``: ``(None, "")`` (``CELERY_TASK_ROUTES`` sends it to the default queue). A set queue
    that a live worker serves: ``(queue, "")``. A set queue that no live worker serves: the default queue and a note
    saying so, so the job runs on the CPU workers instead of waiting for a GPU worker that is not there.
    """
    queue = settings.ORCA_TRAIN_QUEUE
    if not queue:
        return None, ""
    if any(queue in node.queues for node in workers_alive()):
        return queue, ""
    default = settings.CELERY_TASK_DEFAULT_QUEUE
    return default, (
        f"no worker serving the {queue!r} queue (ORCA_TRAIN_QUEUE) was seen in the last {ALIVE_WITHIN_S // 60} "
        f"minutes: sent to the {default!r} queue instead (the CPU workers)"
    )


def orca_enqueue(kind: str, model, pk: int) -> str | None:
    """Send job ``kind`` for row ``pk`` of ``model`` once the transaction commits, to the queue :func:`orca_queue`
    picks; a fallback's note goes into the row's log. Returns the queue (None: the routes decide)."""
    from annotation.jobs.lifecycle import run_log
    from annotation.jobs.registry import enqueue

    queue, note = orca_queue()
    if note:
        run_log(model, pk, note)
    enqueue(kind, pk, queue=queue)
    return queue


def orca_device(requested: str) -> tuple[str, str]:
    """``(device, note)`` for ORCA work in this worker: ``requested``, or ``cpu`` with a note when ``cuda`` was asked
    for and torch sees no CUDA device here (imports torch: call it in a worker)."""
    import torch

    if str(requested).startswith("cuda") and not torch.cuda.is_available():
        return "cpu", (f"{requested} was asked for, but this worker has no CUDA device (torch {torch.__version__}): "
                       "running on the CPU instead, which is much slower for large base models")
    return requested, ""


class _Heartbeat(threading.Thread):
    """Daemon thread of a worker's main process: probes CUDA once, registers, then refreshes the row every minute."""

    def __init__(self, hostname: str, queues: list[str]):
        super().__init__(name="orca-worker-heartbeat", daemon=True)
        self.hostname, self.queues = hostname, queues
        self.stop = threading.Event()

    def run(self) -> None:
        probe = cuda_probe()
        registered = False
        while not self.stop.is_set():
            try:
                close_old_connections()
                if not registered or not worker_seen(hostname=self.hostname):
                    worker_register(hostname=self.hostname, queues=self.queues, cuda=bool(probe.get("cuda")),
                                    device_name=probe.get("device_name") or "", versions=probe.get("versions") or {})
                    registered = True
            except Exception:  # noqa: BLE001 - a database outage must not end the thread; the next beat retries
                logger.exception("worker %s: could not record its sign of life", self.hostname)
            finally:
                connection.close()  # this thread's own connection: never held between beats
            self.stop.wait(SEEN_EVERY_S)


_heartbeat: _Heartbeat | None = None


def on_worker_ready(sender=None, **_) -> None:
    """Celery ``worker_ready``: start this worker's heartbeat thread (queues from its consumer)."""
    global _heartbeat
    queues = [queue.name for queue in sender.task_consumer.queues]
    _heartbeat = _Heartbeat(sender.hostname, queues)
    _heartbeat.start()


def on_worker_shutdown(sender=None, **_) -> None:
    """Celery ``worker_shutdown``: stop the heartbeat thread and remove this worker's row."""
    if _heartbeat is None:
        return
    _heartbeat.stop.set()
    try:
        close_old_connections()
        worker_unregister(hostname=_heartbeat.hostname)
    except Exception:  # noqa: BLE001 - shutting down: the row then ages out instead
        logger.exception("worker %s: could not remove its row", _heartbeat.hostname)
    finally:
        connection.close()
