"""python3 -m textstats: see textstats.cli."""

import sys

from textstats.cli import main

sys.exit(main())
