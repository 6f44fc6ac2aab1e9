"""``python -m cooper`` is the ``cooper`` command (used by ``accelerate launch -m cooper``)."""

import sys

from cooper.cli import main

sys.exit(main())
