"""Annotator quality control and crowd studies: gold items, attention checks, qualification, pausing, studies.

Lives in ``annotation`` because the work queue and the rating service (both here) enforce it; the reliability
signals that need agreement statistics and crowd-kit live in ``modelling.reliability`` and act through
:mod:`annotation.crowd.annotators`.
"""
