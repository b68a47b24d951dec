"""``python -m loadtest.dev`` / ``metashard dev``: see ``loadtest.dev.command``."""

import sys

from loadtest.dev.command import main

sys.exit(main())
