"""``python -m outcommit.cli``: the ``outcommit`` command."""

import sys

from . import main

sys.exit(main())
