"""Evaluation results: per-LALM estimates of mean correctness with confidence intervals.

* :mod:`modelling.leaderboard.stats` — the statistics, Django-free (numpy, scipy, statsmodels, ``ppi_py``):
  Student-t and cluster-bootstrap intervals, prediction-powered (PPI++) and active (inverse-probability-weighted)
  estimates, paired differences with Holm-corrected p-values, system-level Spearman ρ / Kendall τ, the budget
  planner.
* :mod:`modelling.leaderboard.services` — the leaderboard over the store (valid ratings on current versions,
  ORCA predictions, judge ratings) and its renderings (JSON, CSV, Markdown, LaTeX, the forest plot).
* :mod:`modelling.leaderboard.rows` — the per-LALM rows: design epochs (:mod:`~modelling.leaderboard.designs`),
  population checks (:mod:`~modelling.leaderboard.population`), annotators crossed with answers
  (:mod:`~modelling.leaderboard.raters`, Django-free) and the displayed means.
* :mod:`modelling.leaderboard.crossfit` — cross-fitted ORCA predictions (K folds over questions) as a job.

This package's ``__init__`` imports nothing, so ``bench/leaderboard.py`` can use ``stats`` without Django.
"""
