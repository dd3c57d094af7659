"""Liveness/readiness probes and request ids."""
import json
import logging

import pytest
from pythonjsonlogger.json import JsonFormatter

from config.observability import ContextFilter, job_log_context, logging_config


def test_healthz_answers_without_touching_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ok_when_database_and_broker_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_503_with_only_a_status_and_logs_why(client, monkeypatch, caplog):
    # Port 1 on loopback refuses connections: a broker that is down.
    # Celery reads these environment variables before its settings; setting them (not the settings) leaves
    # nothing behind for later tests once monkeypatch restores the environment.
    for name in ("CELERY_BROKER_URL", "CELERY_BROKER_WRITE_URL"):
        monkeypatch.setenv(name, "redis://127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING, logger="config.health"):
        response = client.get("/readyz")
    assert response.status_code == 503
    # Anyone may call the probe: no host, port, user or exception text in the answer ...
    assert response.json() == {"status": "unavailable"}
    # ... the operator finds them in the log.
    (record,) = [r for r in caplog.records if r.name == "config.health"]
    assert "broker" in record.getMessage() and "127.0.0.1" in record.getMessage()
    assert "database" not in record.getMessage()


def test_every_response_carries_a_request_id_and_keeps_a_given_one(client):
    assert len(client.get("/healthz")["X-Request-ID"]) == 32
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"})["X-Request-ID"] == "abc-123"


def test_json_logs_carry_the_job_id():
    config = logging_config(fmt="json", level="INFO")
    options = {key: value for key, value in config["formatters"]["json"].items() if key != "()"}
    formatter = JsonFormatter(**options)
    record = logging.LogRecord("orca", logging.INFO, __file__, 1, "item %s done", ("q1",), None)
    with job_log_context(42):
        ContextFilter().filter(record)
    line = json.loads(formatter.format(record))
    assert line["message"] == "item q1 done"
    assert line["job_id"] == "42"
    assert line["level"] == "INFO"
