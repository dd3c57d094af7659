"""Mapping presets: the output files of audio evaluation toolkits read as candidate answers of an existing
benchmark, by the table importer like any other table (:mod:`annotation.services.importers.table`).

Each preset is a mapping document (:mod:`.table_mapping`) less the LALM's name, which these files do not carry:
:func:`preset_mapping` adds it as ``defaults.lalm``. Their field layouts, from the toolkits' own code:

* ``lmms-eval`` — lmms-eval's ``--log_samples`` JSONL (``samples_<task>.jsonl``): one object per document with
  ``doc_id`` (the document's 0-based index in the task's dataset split), ``doc``, ``target``, ``arguments``,
  ``resps`` and ``filtered_resps`` (the answer after the task's filters, a list with one entry per request).
  Questions by position: ``doc_id`` n is the benchmark's n-th question in import order.
* ``lmms-eval-mmau`` — the same file from lmms-eval's MMAU tasks, whose ``process_results`` adds
  ``submission`` (the MMAU record, ``id`` included): questions by MMAU id (``submission.id``).
* ``kimi-audio-evalkit`` — Kimi-Audio-Evalkit's result file ``<model>_<dataset>.jsonl``: the dataset's records
  (``index``, ``audio_path``, ``question``, ``answer``, ``subset``) with ``prediction`` and ``real_prompt``;
  questions by ``index`` (the benchmark's question ids).
* ``mmau`` — MMAU's own result file, the input of its ``evaluation.py``: the benchmark's JSON list (``id``,
  ``question``, ``choices``, ``answer``, …) with the model's answer in ``model_prediction`` (or ``model_output``);
  questions by ``id``.
* ``audiobench`` — AudioBench's log ``log/<model>/<dataset>/<mode>_p<prompt>.json``: a JSON list of
  ``{instruction, reference, task_type, model_prediction}`` in the benchmark's order, without ids; questions by
  position (row n is the n-th question).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """A mapping preset: its label and the mapping document (without the LALM name)."""

    label: str
    mapping: dict


PRESETS: dict[str, Preset] = {
    "lmms-eval": Preset("lmms-eval samples JSONL (questions by doc_id)", {
        "layout": "long", "columns": {"position": "doc_id", "candidate": "filtered_resps"}}),
    "lmms-eval-mmau": Preset("lmms-eval samples JSONL of an MMAU task (questions by the MMAU id)", {
        "layout": "long", "columns": {"question_id": "submission.id", "candidate": "filtered_resps"}}),
    "kimi-audio-evalkit": Preset("Kimi-Audio-Evalkit result JSONL (index, prediction)", {
        "layout": "long", "columns": {"question_id": "index", "candidate": "prediction"}}),
    "mmau": Preset("MMAU result file (model_prediction or model_output, by id)", {
        "layout": "long", "columns": {"question_id": "id", "candidate": ["model_prediction", "model_output"]}}),
    "audiobench": Preset("AudioBench log (model_prediction, by position)", {
        "layout": "long", "columns": {"position": "@row", "candidate": "model_prediction"}}),
}


def preset_mapping(name: str, *, lalm: str) -> dict:
    """The mapping document of preset ``name`` for the answers of LALM ``lalm``.

    Raises:
        KeyError: no such preset (the message lists them).
        ValueError: ``lalm`` is empty.
    """
    if name not in PRESETS:
        raise KeyError(f"no preset {name!r} (presets: {', '.join(PRESETS)})")
    if not lalm.strip():
        raise ValueError("a preset needs the LALM's name: the toolkit's file does not say which LALM answered")
    mapping = copy.deepcopy(PRESETS[name].mapping)
    mapping["defaults"] = {"lalm": lalm.strip()}
    mapping["preset"] = name
    return mapping
