"""``python -m trio_cap.actors.cli`` runs ``cap``."""

import sys

from trio_cap.actors.cli.main import main

sys.exit(main())
