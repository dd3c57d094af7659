"""Mapping presets: the output files of audio evaluation toolkits read as candidate answers of an existing
benchmark, by the table importer like any other table (:mod:`annotation.services.importers.table`).

Each preset is a mapping document (:mod:`.table_mapping`) less the LALM's name, which these files do not carry:
:func:`preset_mapping` adds it as ``defaults.lalm``. Their field layouts, from the toolkits' own code:

* ``lmms-eval`` — lmms-eval's ``--log_samples`` JSONL (``samples_<task>.jsonl``): one object per document with
  ``doc_id`` (the document's 0-based index in the task's dataset split), ``doc``, ``target``, ``arguments``,
  ``resps`` and ``filtered_resps`` (the answer after the task's filters, a list with one entry per request).
  Questions by position: ``doc_id`` n is the benchmark's n-th question in import order — never by position alone
  when the ``doc`` carries its ``question``: that text must be the n-th question's (:mod:`.table_match`).
* ``lmms-eval-mmau`` — the same file from lmms-eval's MMAU tasks, whose ``process_results`` adds
  ``submission`` (the MMAU record, ``id`` included): questions by MMAU id (``submission.id``).
* ``kimi-audio-evalkit`` — Kimi-Audio-Evalkit's result file ``<model>_<dataset>.jsonl``: the dataset's records
  (``index``, ``audio_path``, ``question``, ``answer``, ``subset``) with ``prediction`` and ``real_prompt``;
  questions by ``index`` (the benchmark's question ids).
* ``mmau`` — MMAU's own result file, the input of its ``evaluation.py``: the benchmark's JSON list (``id``,
  ``question``, ``choices``, ``answer``, …) with the model's answer in ``model_prediction`` (or ``model_output``);
  questions by ``id``.
* ``audiobench`` — AudioBench's files beside each other in ``log/<model>/<dataset>/``: the predictions, a JSON list
  of ``{instruction, reference, task, task_type, model_prediction}`` (``format_model_predictions``), and the
  judge's ``<dataset>_<metric>_score.json``, an object ``{"<metric>": {"judge_score", "success_rate"},
  "task_scores", "details": [{question, reference, model_prediction, judge_response, rate_score, success,
  task}]}`` (``eval_llama3_70b.py``). Neither carries an id, and a run with ``number_of_samples`` shuffles and
  samples the dataset: questions are matched by their text (``instruction`` / ``question``, e.g.
  ``"Question:\n…\nChoices:\n…"``; :mod:`.table_match`), never by position. The judge file's ``rate_score``
  becomes that judge's rating (``audiobench:llama3-70b``; the 0–5 or 0/1 scale read from its ``judge_score``),
  ``success`` 0 a failure.
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
    "lmms-eval": Preset("lmms-eval samples JSONL (questions by doc_id, checked against the doc's question text)", {
        "layout": "long", "columns": {"position": "doc_id", "question": "doc.question", "candidate": "filtered_resps"},
        "optional": ["question"]}),
    "lmms-eval-mmau": Preset("lmms-eval samples JSONL of an MMAU task (questions by the MMAU id)", {
        "layout": "long", "columns": {"question_id": "submission.id", "candidate": "filtered_resps"}}),
    "kimi-audio-evalkit": Preset("Kimi-Audio-Evalkit result JSONL (index, prediction)", {
        "layout": "long", "columns": {"question_id": "index", "candidate": "prediction"}}),
    "mmau": Preset("MMAU result file (model_prediction or model_output, by id)", {
        "layout": "long", "columns": {"question_id": "id", "candidate": ["model_prediction", "model_output"]}}),
    "audiobench": Preset("AudioBench predictions or judge score file (model_prediction, rate_score; by question "
                         "text)", {
        "layout": "long",
        "columns": {"question": ["question", "instruction"], "reference": "reference",
                    "candidate": "model_prediction", "judge_score": "rate_score",
                    "judge_explanation": "judge_response", "judge_success": "success"},
        "match": "question_text",
        "optional": ["reference", "judge_score", "judge_explanation", "judge_success"]}),
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
