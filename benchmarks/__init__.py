"""Side-by-side benchmarks (``make bench``). The serving code is imported as the image has it:
``container/`` goes on ``sys.path`` here, once, before any benchmark module imports ``adapter_server``."""

import sys
from pathlib import Path

_CONTAINER = str(Path(__file__).resolve().parents[1] / "container")
if _CONTAINER not in sys.path:
    sys.path.insert(0, _CONTAINER)
