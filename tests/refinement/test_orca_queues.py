"""The queues on the real ORCA annotations (``../shared/data/orca_seed108``, BUTSpeechFIT/ORCA seed-108 split).

The expected counts are derived here from the JSON itself, independently of the platform: each key
``<question id>_<LALM tag>`` is one candidate answer of question ``<question id>``; each rating position is one
annotator; a feedback entry's one-letter strings are its codes (a/e/r/u/q), longer strings are comments; a null
score without U or E is not a rating (the importer skips it). The rules are those of the issue with the default
settings: any Q -> question, any R -> reference, A on >= 2 ratings or >= 50 % of the question's ratings ->
rationale, U or E -> expert, sample variance >= 1.0 of one candidate's scores -> disagreement.
"""
import json
import re
import statistics
from collections import defaultdict

import pytest
from django.core.management import call_command

from refinement.models import CorrectionItem

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

FILES = ("seed_108_train.json", "seed_108_dev.json")
KEY = re.compile(r"^(?P<question>.+)_(?P<tag>M\d+_\d+)$")


def expected_queue_counts(paths) -> dict[str, int]:
    """Open items per queue that the issue's rules give for these ORCA files (see the module docstring)."""
    ratings_by_question = defaultdict(list)  # question id -> [(candidate key, score, codes)]
    for path in paths:
        for key, item in json.loads(path.read_text()).items():
            question = KEY.match(key)["question"]
            for score, feedback in zip(item["ratings"], item["feedback"], strict=True):
                entries = [e.strip() for e in (feedback or []) if isinstance(e, str)]
                codes = {e.upper() for e in entries if len(e) == 1}
                if score is None and not codes & {"U", "E"}:
                    continue
                ratings_by_question[question].append((key, score, codes))
    counts = dict.fromkeys(["question", "reference", "rationale", "transcript", "expert", "disagreement"], 0)
    for ratings in ratings_by_question.values():
        n = len(ratings)

        def with_code(code, ratings=ratings):
            return sum(code in codes for _, _, codes in ratings)

        counts["question"] += with_code("Q") >= 1
        counts["reference"] += with_code("R") >= 1
        counts["rationale"] += with_code("A") >= 2 or (n and with_code("A") / n >= 0.5)
        counts["expert"] += any(codes & {"U", "E"} for _, _, codes in ratings)
        scores = defaultdict(list)
        for key, score, _ in ratings:
            if score is not None:
                scores[key].append(score)
        counts["disagreement"] += any(len(s) >= 2 and statistics.variance(s) >= 1.0 for s in scores.values())
    return counts


def test_imported_orca_annotations_fill_the_queues_as_their_codes_say(shared_data, capsys):
    paths = [shared_data / "orca_seed108" / name for name in FILES]
    for path in paths:
        call_command("import_annotations", str(path), "--format", "orca")
    capsys.readouterr()

    call_command("refinement_queues", "--json")
    counts = json.loads(capsys.readouterr().out)

    expected = expected_queue_counts(paths)
    assert counts == expected
    # The real data does carry every kind of flag (a sanity check that the derivation is not vacuous).
    assert all(expected[q] > 0 for q in ("reference", "rationale", "expert", "disagreement"))
    assert CorrectionItem.objects.filter(status="open").count() == sum(expected.values())
    print(expected)
