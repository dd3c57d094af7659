"""The house rules of the code base, read from the source (``bench/house.py``'s import graph).

- ``annotation`` imports neither ``refinement`` nor ``modelling``; ``modelling.orca`` imports no Django and
  nothing of the apps (it runs as ``python -m modelling.orca`` on a machine without the platform).
- No import circle among the project's modules, counting imports inside functions too; tasks import services,
  services never import tasks (they send them by name through ``annotation.jobs``).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def house():
    spec = importlib.util.spec_from_file_location("bench_house", ROOT / "bench" / "house.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_house"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graph_all(house):
    return house.import_graph(house.project_files(), top_level_only=False)


def test_annotation_imports_neither_refinement_nor_modelling(graph_all):
    offending = {
        (module, target)
        for module, targets in graph_all.items()
        if module.split(".")[0] == "annotation"
        for target in targets
        if target.split(".")[0] in {"refinement", "modelling"}
    }
    assert offending == set()


def test_orca_package_imports_nothing_of_django_or_the_apps(house):
    for path in (ROOT / "modelling" / "orca").rglob("*.py"):
        source = path.read_text()
        assert "import django" not in source and "from django" not in source, path
    graph = house.import_graph(house.project_files(), top_level_only=False)
    outside = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("modelling.orca")
        for target in targets
        if not target.startswith("modelling.orca")
    }
    assert outside == set()


def test_no_import_circle_at_module_level(house):
    assert house.circles(house.import_graph(house.project_files(), top_level_only=True)) == []


def test_no_import_circle_even_counting_imports_inside_functions(house, graph_all):
    assert house.circles(graph_all) == []


def test_services_never_import_tasks(graph_all):
    offending = {
        (module, target)
        for module, targets in graph_all.items()
        if ".services" in module or module.startswith("annotation.jobs")
        for target in targets
        if target.endswith(".tasks")
    }
    assert offending == set()


def test_the_circle_finder_finds_a_circle(house):
    assert house.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]



#: Notes that live beside the repository, not in it: a reader of a clone cannot open them.
#: (Spelled in parts, so that this list is not itself a citation.)
_NOTES_OUTSIDE = tuple(stem + tail for stem, tail in (("ARCHITECTURE", ".md"), ("STYLE", ".md"),
                                                      ("MODELLING-", "NOTES")))


def test_code_and_pages_cite_only_what_a_reader_of_the_repository_can_open(house):
    bench = sorted((ROOT / "bench").glob("*.py")) + sorted((ROOT / "bench").glob("*.md"))
    files = [*house.project_files(), *sorted((ROOT / "templates").rglob("*.html")), *bench, ROOT / "README.md"]
    offending = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(note in line for note in _NOTES_OUTSIDE)
    ]
    assert offending == []
