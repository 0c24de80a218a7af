"""``python -m cdk_adapters.cli``."""

import sys

from cdk_adapters.cli import main

sys.exit(main())
