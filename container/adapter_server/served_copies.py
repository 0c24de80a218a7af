"""Where the private copies vLLM serves adapters from are made and kept.

Each registration's admitted files are copied (`registrations.copy_admitted`) into a directory
unique to the adapter and its content, under the state directory when there is one, so copies
outlive an in-place restart. The copy is made beside its final place and renamed into it whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
from pathlib import Path

from adapter_server.registrations import DigestRefused, copy_admitted, remove_copy
from adapter_server.serving_context import ServingContext


class ServedCopies:
    """The directory of served copies (made on first use) and the copies in it."""

    def __init__(self, context: ServingContext) -> None:
        self._context = context
        self._root: Path | None = None

    async def copy(self, key: str, src: str) -> tuple[str, str | None, Path] | None:
        """`copy_admitted` of `src` into a directory unique to this adapter and content:
        (digest, `src`'s fingerprint, the copy), or None when `src` holds links or cannot be read.

        Unique per name and content because vLLM's prefix cache keys an adapter's KV blocks by its
        name and path: a re-created adapter (same name, new files) must never share a path with
        the old one. Copies live under the state directory, so they outlive an in-place restart.
        """
        root = await self._copies_root()
        staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".copying-", dir=root))
        target = staging / "files"
        try:
            digest, fingerprint = await asyncio.to_thread(copy_admitted, Path(src), target)
        except (DigestRefused, OSError):
            await asyncio.to_thread(_remove_staging, staging)
            return None
        name_key = hashlib.sha256(key.encode()).hexdigest()[:16]
        served = root / f"{name_key}-{digest[:32]}"
        if served.exists():  # the same adapter and files, copied before (a retry, a replay)
            await asyncio.to_thread(_remove_staging, staging)
        else:
            target.rename(served)
            await asyncio.to_thread(shutil.rmtree, staging)
        return digest, fingerprint, served

    async def _copies_root(self) -> Path:
        if self._root is None:
            state_dir = self._context.settings.state_dir
            if state_dir is not None:
                root = Path(state_dir) / "served"
                await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True, mode=0o700)
            else:
                root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="cdk-adapters-served-"))
            self._root = root
        return self._root


def _remove_staging(staging: Path) -> None:
    remove_copy(staging / "files")
    shutil.rmtree(staging, ignore_errors=True)
