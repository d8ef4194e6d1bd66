"""``python -m actors.cli`` runs ``cap``."""

import sys

from actors.cli.main import main

sys.exit(main())
