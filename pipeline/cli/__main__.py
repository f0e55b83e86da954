"""`python -m tracehouse.pipeline.cli`: the `tracehouse` command."""

import sys

from tracehouse.pipeline.cli.main import main

sys.exit(main())
