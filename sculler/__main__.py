"""``python -m sculler ...``: the ``sculler`` command (see :mod:`sculler.cli`)."""

import sys

from sculler.cli import main

if __name__ == "__main__":
    sys.exit(main())
