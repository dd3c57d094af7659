"""The modelling app's pages, one module per page family (thin: access from ``annotation.access``, validate the
query string or form, call services, render).

* ``agreement``: Krippendorff's alpha;
* ``training``: ORCA training runs and the model registry;
* ``items``: items by predicted disagreement;
* ``routing``: routing by predicted disagreement and ORCA as an extra rater;
* ``leaderboard``: the LALM leaderboard and its cross-fits.

Annotator reliability pages live with their app part, in ``modelling.reliability.views``.
"""
