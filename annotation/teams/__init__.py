"""Teams: which benchmarks an annotator or expert works on (``BenchmarkMembership``), read by the work queue
(:mod:`annotation.teams.scope`) and the experts' refinement queues; and the admins' pages for users, roles, teams and
bulk invitations (:mod:`annotation.teams.views`; accounts are made by ``annotation.services.accounts``)."""
