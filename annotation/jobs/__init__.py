"""How a long job runs: one package for every kind (Stage 1 preparation, LLM judge runs, exports, ORCA training
runs and cross-fits).

- :mod:`annotation.jobs.registry`: each kind registers the Celery task it is sent to (by name) and, for item
  kinds, the work of one item; :func:`~annotation.jobs.registry.enqueue` sends a kind's task after the commit.
  Queues come from ``CELERY_TASK_ROUTES`` in the settings, never from the caller.
- :mod:`annotation.jobs.lifecycle`: a job kept as one row (exports, training runs, cross-fits): claim, heartbeat,
  finish, fail, cancel, fail when silent.
- :mod:`annotation.jobs.items`: a job made of ``JobItem`` rows (preparation, judge runs): claim, close, finish,
  retry, cancel, send again when silent.

Tasks (``<app>/tasks.py``) import the services at module top and call one function; services never import tasks.
"""
