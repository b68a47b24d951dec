"""``python -m manager.cli``: the ``metashard`` command."""

import sys

from manager.cli.main import main

sys.exit(main())
