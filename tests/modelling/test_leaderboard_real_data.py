"""The leaderboard on the real ORCA seed-108 annotations (train + dev): the 15 LALMs with mean human ratings equal
to those computed straight from the files. Expected numbers are derived from the files, never typed in."""
import json
import re

import numpy as np
import pytest

from annotation.services.importers import ratings_import_orca
from modelling.leaderboard.services import leaderboard_compute

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

KEY = re.compile(r"^(?P<question>.+)_(?P<tag>M\d+_\d+)$")


def test_seed_108_mean_ratings_per_lalm_equal_the_files(shared_data):
    files = [shared_data / "orca_seed108" / f"seed_108_{name}.json" for name in ("train", "dev")]
    scores: dict[str, list[int]] = {}
    correctness: dict[str, list[float]] = {}
    answers: dict[str, int] = {}
    for path in files:
        for key, item in json.loads(path.read_text()).items():
            tag = KEY.match(key)["tag"]
            answers[tag] = answers.get(tag, 0) + 1
            valid = [s for s in item["ratings"] if s is not None]
            scores.setdefault(tag, []).extend(valid)
            if valid:
                correctness.setdefault(tag, []).append(float(np.mean([(s - 1) / 4 for s in valid])))
        ratings_import_orca(path=path)
    board = leaderboard_compute(benchmark="ORCA imported")
    rows = {r.lalm: r for r in board.rows}
    assert set(rows) == set(scores) and len(rows) == 15
    for tag, values in scores.items():
        row = rows[tag]
        assert row.answers == answers[tag] and row.ratings == len(values)
        assert row.mean_rating == pytest.approx(np.mean(values), abs=1e-4)
        assert row.sd_rating == pytest.approx(np.std(values, ddof=1), abs=1e-4)
        assert row.mean_correctness == pytest.approx(np.mean(correctness[tag]), abs=1e-4)
        assert row.ci[0] < row.mean_correctness < row.ci[1]
        assert (row.estimator, row.ci_method, row.rated_share, row.sampling) == (
            "classical", "t_adjusted", 1.0, "uniform")
    assert len(board.pairwise) == 15 * 14 // 2
    # LALMs of seed-108 share at most 32 questions: every verdict rests on at least the minimum of shared questions
    assert all(p.n_questions >= 10 for p in board.pairwise if p.verdict != "undecided")
