"""Feedback codes and the rating scale (ORCA paper, Appendix A).

Codes are stored on a rating as one string holding a subset of ``QARUE`` in that canonical order
(e.g. ``"AR"``), so the database can check them with a plain ``IN`` list on every backend.
"""
from itertools import combinations

#: Canonical order of the five feedback codes.
CODE_ORDER = "QARUE"

#: Code -> (short label, definition), ORCA paper Appendix A.
CODE_DEFINITIONS: dict[str, tuple[str, str]] = {
    "Q": ("Incomplete question", "The options mentioned in the question were not provided."),
    "A": ("Had to use audio", "The rationale and the description were insufficient for judgement."),
    "R": ("Reference answer incorrect/incomplete", "The reference answer provided was flawed."),
    "U": (
        "Unable to judge (ambiguous)",
        "Still could not judge even after listening to the audio; the question was ambiguous.",
    ),
    "E": ("Unable to judge (expertise)", "Lacked the specific expertise required to make a judgment."),
}

#: Codes that allow a rating without a score.
UNABLE_CODES = frozenset("UE")

#: Score -> (label, definition), ORCA paper Appendix A.
SCORE_DEFINITIONS: dict[int, tuple[str, str]] = {
    1: ("Not correct", "The answer is irrelevant or too long."),
    2: (
        "Slightly correct",
        "Contains a few relevant keywords, but is either too long or too short to be satisfactory.",
    ),
    3: ("Moderately correct", "At least 50% accurate but missing key information."),
    4: ("Almost correct", "Close to the reference answer, but includes unnecessary details."),
    5: (
        "Completely correct",
        "The candidate and reference answers have the exact same semantic meaning, "
        "and the candidate response is short and precise.",
    ),
}

#: Every canonical code string: "", "Q", "A", ..., "QARUE" (32 values).
ALL_CODE_STRINGS: tuple[str, ...] = tuple(
    "".join(combo) for n in range(len(CODE_ORDER) + 1) for combo in combinations(CODE_ORDER, n)
)


class UnknownCodeError(ValueError):
    """A feedback code outside {Q, A, R, U, E}."""


def normalize_codes(codes) -> str:
    """Return the canonical code string for an iterable of codes (any case, any order, duplicates allowed).

    Args:
        codes: iterable of one-letter strings, or a string such as ``"ra"``.

    Returns:
        A subset of ``"QARUE"`` in canonical order, e.g. ``["r", "a"] -> "AR"``.

    Raises:
        UnknownCodeError: a code is not one of Q, A, R, U, E.
    """
    chosen = set()
    for code in codes:
        if not isinstance(code, str) or code.upper() not in CODE_ORDER or len(code) != 1:
            raise UnknownCodeError(f"unknown feedback code {code!r} (expected one of Q, A, R, U, E)")
        chosen.add(code.upper())
    return "".join(c for c in CODE_ORDER if c in chosen)
