"""`make run`'s setup: demo accounts and the bundled demo benchmark."""
import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from annotation import demo
from annotation.models import Benchmark, CandidateAnswer, Question
from annotation.services.accounts import DEMO_ACCOUNTS, DEMO_PASSWORD, user_roles

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.MEDIA_ROOT = tmp_path / "media"


def test_setup_demo_creates_the_accounts_and_imports_the_demo_benchmark(capsys):
    call_command("setup_demo")

    out = capsys.readouterr().out
    assert DEMO_PASSWORD in out
    for username, role in DEMO_ACCOUNTS.items():
        user = authenticate(username=username, password=DEMO_PASSWORD)
        assert user is not None, username
        assert role in user_roles(user)

    benchmark = Benchmark.objects.get(name=demo.BENCHMARK_NAME)
    n_questions = sum(1 for _ in demo.BENCHMARK_FILE.open())
    assert Question.objects.filter(benchmark=benchmark).count() == n_questions
    with_audio = set(Question.objects.filter(audio__isnull=False).values_list("external_id", flat=True))
    assert {"demo-beeps", "demo-chord", "demo-sweep", "demo-weather", "demo-accent"} <= with_audio
    assert CandidateAnswer.objects.count() == n_questions * len(demo.CANDIDATE_FILES)


def test_setup_demo_twice_changes_nothing():
    call_command("setup_demo")
    counts = (Question.objects.count(), CandidateAnswer.objects.count())
    call_command("setup_demo")
    assert (Question.objects.count(), CandidateAnswer.objects.count()) == counts
