"""Rater reliability: per-annotator signals, a combined risk score, warn/pause thresholds, snapshots and the
admins' ranking page. ``signals`` is pure (numpy, pandas, crowd-kit) so ``bench/quality.py`` runs it on raw data."""
