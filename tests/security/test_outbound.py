"""Outbound requests reach only globally routable addresses (plus ``PROVIDER_PRIVATE_NETWORKS``), checked after
resolution where the connection is made (issue #34 item 4, #33 item 6): the shared address space 100.64.0.0/10
(Alibaba Cloud's metadata service 100.100.100.200) is refused for table URLs and ``base_url``s, a host whose DNS
answer turns inward after the check is refused when the request is made (table downloads and model clients), and a
``base_url`` whose host does not resolve yet is saved with a note instead of refused.

No test sends traffic off the machine, even against the old code: ``network_guard`` (tests/security/conftest.py)
lets sockets connect to loopback only and answers DNS lookups from the test's own table.
"""
import pytest
from django.test import override_settings
from django.urls import reverse

from annotation.models import LALM, Judge, TableImport
from annotation.outbound import url_address_problem
from annotation.providers.base import ProviderError
from annotation.services.judging import judge_client_for
from tests.fakes.openai_compat import FakeOpenAICompat
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_ROWS, serving, write_csv

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("network_guard")]

PUBLIC = "93.184.216.34"  # what the rebinding host answers first: a global address (never connected to)


def _lalm_form(**fields) -> dict:
    return {"name": "Qwen2-Audio", "provider": "openai", "model": "qwen2-audio", "audio_input": "on",
            "is_active": "on", **fields}


@pytest.mark.parametrize("address", ["100.64.0.1", "100.100.100.200", "100.127.255.254", "198.18.0.1",
                                     "240.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:100.100.100.200]"])
def test_non_global_addresses_are_refused_for_table_urls_and_base_urls(admin_browser, network_guard, address):
    url = f"http://{address}/latest/meta-data/"
    assert "is a " in url_address_problem(url) and "PROVIDER_PRIVATE_NETWORKS" in url_address_problem(url)
    page = admin_browser.post(reverse("annotation:imports"), {"benchmark_name": "B", "url": url}).content.decode()
    assert "is not allowed" in page and not TableImport.objects.exists()
    response = admin_browser.post(reverse("annotation:lalm-new"), _lalm_form(base_url=f"http://{address}/v1"))
    assert response.status_code == 400 and "PROVIDER_PRIVATE_NETWORKS" in response.content.decode()
    judge = admin_browser.post(reverse("annotation:judge-new"), {
        "name": "j", "provider": "openai", "model": "m", "prompt_variant": "full", "mode": "generate",
        "base_url": f"http://{address}/v1", "is_active": "on"})
    assert judge.status_code == 400 and not LALM.objects.exists() and not Judge.objects.exists()
    assert network_guard.refused == []  # refused before any socket was opened


def test_a_table_url_whose_dns_answer_turns_inward_after_the_check_is_refused_at_the_connection(
        admin_browser, network_guard, tmp_path, settings):
    table = write_csv(tmp_path / "remote.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS).read_bytes()
    with serving({"/remote.csv": table}) as base:
        port = base.rsplit(":", 1)[1]
        settings.PROVIDER_PRIVATE_NETWORKS = []
        network_guard.resolves("rebind.test", [PUBLIC], ["127.0.0.1"])  # public when checked, loopback after
        page = admin_browser.post(reverse("annotation:imports"), {
            "benchmark_name": "B", "url": f"http://rebind.test:{port}/remote.csv"}).content.decode()
        assert "rebind.test is a loopback address (127.0.0.1)" in page
        assert not TableImport.objects.exists()
        settings.PROVIDER_PRIVATE_NETWORKS = ["127.0.0.0/8"]  # a file server on this machine, allowed: it works
        network_guard.resolves("files.test", ["127.0.0.1"])
        response = admin_browser.post(reverse("annotation:imports"), {
            "benchmark_name": "B", "url": f"http://files.test:{port}/remote.csv"})
        assert response.status_code == 302 and TableImport.objects.get().rows == 9
    assert network_guard.refused == []


def test_a_saved_base_url_whose_dns_answer_turns_inward_is_refused_when_the_request_is_made(network_guard):
    with FakeOpenAICompat(reply=lambda r: "Score: 4") as fake, override_settings(
            PROVIDER_PRIVATE_NETWORKS=[], PREPARATION_MAX_ATTEMPTS=1):
        # public when the row is saved and when its client is built, loopback when the client connects
        network_guard.resolves("model.test", [PUBLIC], [PUBLIC], ["127.0.0.1"])
        judge = Judge(name="rebound", provider="openai", model="m",
                      settings={"base_url": f"http://model.test:{fake.port}/v1", "logprobs": False})
        judge.full_clean()  # the save-time check saw a public address
        judge.save()
        with pytest.raises(ProviderError, match=r"model\.test is a loopback address \(127\.0\.0\.1\)"):
            judge_client_for(judge=judge).judge(prompt="Rate. Score:")
        assert fake.requests == []
    assert network_guard.refused == []


def test_a_base_url_whose_host_does_not_resolve_yet_is_saved_with_a_note_and_checked_at_use(
        admin_browser, network_guard):
    response = admin_browser.post(reverse("annotation:lalm-new"), _lalm_form(base_url="http://gpu-box.test:8000/v1"))
    assert response.status_code == 302
    page = admin_browser.get(response["Location"]).content.decode()
    assert "does not resolve yet" in page and "checked when a request is made" in page
    lalm = LALM.objects.get()
    assert lalm.settings["base_url"] == "http://gpu-box.test:8000/v1"
    from annotation.providers.answers import answer_generator_for

    with override_settings(PREPARATION_MAX_ATTEMPTS=1), pytest.raises(ProviderError, match="does not resolve"):
        answer_generator_for(lalm=lalm).answer(audio_path=None, question="What is heard?")
    assert network_guard.refused == []
