"""A new admin brings a benchmark in from the browser: upload a CSV and a zip of WAV files → the mapping guessed
from the column names → preview with playable audio → validate → import → the leaderboard shows the file's LALMs.
The flow runs under the site's Content-Security-Policy; the pages, with the preview and the job shown, pass
axe-core (checked in a second browser context that may inject it)."""
import re
from urllib.parse import quote

import pytest

from annotation.models import CandidateAnswer, Question, Rating, TableImport
from tests.e2e.helpers import axe_violations as _axe
from tests.e2e.helpers import login
from tests.e2e.helpers import screenshot as _shot
from tests.factories import UserFactory
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_ROWS, write_csv, write_wav_folder, zip_folder

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]



def test_an_admin_uploads_maps_previews_and_imports_and_the_leaderboard_shows_the_files_lalms(
    live_server, page, browser, settings, tmp_path, axe_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_DIR = tmp_path / "media" / "imports"
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 20
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    audio = zip_folder(write_wav_folder(tmp_path / "wavs"), tmp_path / "wavs.zip", prefix="wavs/")
    UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"])  # password "pw"
    page.set_default_timeout(30_000)

    login(page, live_server.url, "adm")

    # Step 1: the "Data" group leads to the import page.
    page.get_by_role("link", name="Data", exact=True).click()
    page.get_by_role("link", name="New benchmark / Add data").click()
    page.get_by_label("Benchmark").fill("My benchmark")
    page.get_by_label("Table file").set_input_files(str(table))
    page.get_by_label("Audio files (zip)").set_input_files(str(audio))
    page.get_by_role("button", name="Read the table").click()
    page.get_by_role("heading", name="Detected columns and first rows").wait_for()

    # Step 2: the first rows, and the mapping guessed from the column names.
    assert page.get_by_role("columnheader", name="response").is_visible()
    assert page.get_by_role("cell", name="Probably a dog or a fox.").is_visible()
    assert page.get_by_label("LALM (optional)", exact=True).input_value() == "model"
    assert page.get_by_label("Candidate (optional)", exact=True).input_value() == "response"
    assert page.get_by_label("Rating scale: values").input_value() == "0=1, 0.5=3, 1=5"

    # Preview: ten rows at most (here nine), each with an audio player that loads the WAV file.
    page.get_by_role("button", name="Preview ten rows").click()
    players = page.locator("#import-preview audio")
    players.first.wait_for()
    assert players.count() == 9
    duration = players.first.evaluate(
        "el => new Promise((done, fail) => { el.addEventListener('loadedmetadata', () => done(el.duration));"
        " el.addEventListener('error', () => fail('the audio did not load')); el.load(); })")
    assert duration == pytest.approx(0.2, abs=0.01)

    page.get_by_role("button", name="Validate (dry run)").click()
    page.get_by_text("candidate answers: 9 created").wait_for()
    assert Question.objects.count() == 0

    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("#import-job", has_text="Import #").get_by_text("Done").wait_for()
    assert CandidateAnswer.objects.count() == 9 and Rating.objects.count() == 9
    record = TableImport.objects.get()
    assert record.imported_at is not None
    _shot(page, "admin", f"/imports/{record.pk}/imported")

    # The leaderboard shows the file's LALMs (the first page with statistics imports scipy: slow on a busy machine).
    page.goto(f"{live_server.url}/modelling/leaderboard/?benchmark={quote('My benchmark')}", timeout=120_000)
    for lalm in ("Qwen2-Audio", "SALMONN", "Gemini"):
        assert page.get_by_role("row", name=re.compile(lalm)).first.is_visible()

    # Accessibility of the two pages, with the preview and the finished import on the page.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    checked = context.new_page()
    checked.set_default_timeout(30_000)
    try:
        login(checked, live_server.url, "adm")
        checked.goto(f"{live_server.url}/imports/")
        assert _axe(checked, axe_path) == []
        checked.goto(f"{live_server.url}/imports/{record.pk}/")
        checked.get_by_role("button", name="Preview ten rows").click()
        checked.locator("#import-preview audio").first.wait_for()
        assert _axe(checked, axe_path) == []
        assert checked.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    finally:
        context.close()
