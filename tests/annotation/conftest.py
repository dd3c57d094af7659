"""Fixtures shared by the annotation tests."""
from tests.judges import judged_items  # noqa: F401 - a fixture
