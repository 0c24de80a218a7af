"""``python -m adapter_server serve``: the image's entrypoint."""

from __future__ import annotations

import sys

from adapter_server.launch import main

if __name__ == "__main__":
    sys.exit(main())
