"""`make run`'s setup: demo accounts and the bundled demo benchmark."""
import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command

from annotation import demo
from annotation.access import roles_of
from annotation.models import Benchmark, CandidateAnswer, Question
from annotation.services.accounts import DEMO_ACCOUNTS, DEMO_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DEBUG = True  # as in `make run` (config.settings.local)


def test_setup_demo_refuses_the_demo_accounts_with_debug_off(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="refusing to create the demo accounts"):
        call_command("setup_demo")
    assert not get_user_model().objects.exists() and not Question.objects.exists()

    call_command("setup_demo", "--i-know-this-is-not-production")
    assert authenticate(username="admin", password=DEMO_PASSWORD) is not None


def test_setup_demo_without_accounts_imports_the_demo_under_any_settings(settings):
    settings.DEBUG = False
    call_command("setup_demo", "--no-accounts")
    assert Question.objects.exists() and not get_user_model().objects.exists()


def test_setup_demo_creates_the_accounts_and_imports_the_demo_benchmark(capsys):
    call_command("setup_demo")

    out = capsys.readouterr().out
    assert DEMO_PASSWORD in out
    for username, role in DEMO_ACCOUNTS.items():
        user = authenticate(username=username, password=DEMO_PASSWORD)
        assert user is not None, username
        assert role in roles_of(user)

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


@pytest.mark.shared_data
def test_setup_demo_with_real_data_leaves_every_lalm_answer_ratable(shared_data):
    call_command("setup_demo", "--data", str(shared_data), "--no-accounts")

    mmar = Benchmark.objects.get(name="MMAR")
    qwen = CandidateAnswer.objects.filter(lalm__name="Qwen3-Omni-30B (thinking)")
    assert qwen.count() == sum(1 for _ in (shared_data / "mmar_preds_qwen3omni" / "v9_predictions.jsonl").open())
    # Every imported MMAR answer hangs on the version annotators see, including the ORCA-rated questions.
    stale = [c for c in qwen.select_related("question_version__question") if
             c.question_version.question.current_version_id != c.question_version_id]
    assert stale == []
    assert Question.objects.filter(benchmark=mmar, audio__isnull=False).exists()
