"""The annotation app's pages, one module per page family (thin views: access from ``annotation.access``, a form
for input, one service or selector call, a template).

* ``rating``: the annotators' workbench (home, next item, rate, skip, own ratings, guidelines);
* ``audio``: the audio stream of the rating pages;
* ``overview``: the rating overview (experts and admins);
* ``jobs``: Stage 1 preparation jobs (experts read, admins start, retry and cancel);
* ``judges``: LLM judges and their comparison with humans;
* ``endpoints``: LALMs and judges set up in forms, and their connection tests;
* ``exports``: dataset and corrected-benchmark exports (admins);
* ``audit``: the audit log (admins).
"""
