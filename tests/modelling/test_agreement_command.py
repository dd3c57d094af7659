"""``manage.py agreement``."""
import json
from io import StringIO

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from .agreement_helpers import KRIPPENDORFF_2011, rate_in_db

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = StringIO()
    call_command("agreement", *args, stdout=out)
    return out.getvalue()


def test_json_output_has_exactly_alpha_ci_n_items_n_ratings_and_level():
    rate_in_db(KRIPPENDORFF_2011)
    data = json.loads(_run("--json", "--resamples", "200"))
    assert set(data) == {"alpha", "ci", "n_items", "n_ratings", "level"}
    assert data["level"] == "ordinal"
    assert data["alpha"] == pytest.approx(0.815, abs=0.0005)
    low, high = data["ci"]
    assert low <= data["alpha"] <= high
    assert (data["n_items"], data["n_ratings"]) == (12, 41)


def test_interval_level_and_benchmark_filter():
    _, candidates = rate_in_db(KRIPPENDORFF_2011)
    rate_in_db([[1, 5], [5, 1]])  # another benchmark's disagreeing ratings
    benchmark = candidates[0].question_version.question.benchmark.name
    # Each factory candidate has its own benchmark; put the worked example's candidates under one name.
    from annotation.models import Question

    Question.objects.filter(versions__candidates__in=candidates).update(
        benchmark=candidates[0].question_version.question.benchmark
    )
    data = json.loads(_run("--json", "--level", "interval", "--benchmark", benchmark, "--resamples", "0"))
    matrix = np.asarray([[np.nan if v is None else v for v in row] for row in KRIPPENDORFF_2011], dtype=float)
    assert data["alpha"] == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"))
    assert data["level"] == "interval" and data["ci"] == [None, None] and data["n_ratings"] == 41


def test_human_readable_output_names_the_figures():
    rate_in_db([[1, 2, 3], [1, 2, 3]])
    text = _run("--resamples", "100")
    for label in ("alpha", "95% CI", "n_items", "n_ratings", "ordinal"):
        assert label in text
    assert "1.0000" in text


def test_unknown_benchmark_is_a_clear_error():
    with pytest.raises(CommandError, match="no benchmark named 'Nope'"):
        _run("--benchmark", "Nope")


def test_no_ratings_gives_undefined_alpha_not_a_crash():
    data = json.loads(_run("--json"))
    assert data == {"alpha": None, "ci": [None, None], "n_items": 0, "n_ratings": 0, "level": "ordinal"}
