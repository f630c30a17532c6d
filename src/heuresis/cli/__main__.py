"""``python -m heuresis.cli``: the ``heuresis`` command."""

import sys

from heuresis.cli import main

sys.exit(main())
