"""``python -m outcommit.cli``: the ``outcommit`` command."""

import sys

from . import main

if __name__ == "__main__":  # importing the module (a walk of the package) runs nothing
    sys.exit(main())
