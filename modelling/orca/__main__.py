"""``python -m modelling.orca`` — see :mod:`modelling.orca.cli`."""

import sys

from .cli import main

sys.exit(main())
