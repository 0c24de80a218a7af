"""`open_regular_file`: the guard between listing an adapter's files and reading them. A file the
listing saw may be replaced by a link before it is opened; opening refuses the link itself
(``O_NOFOLLOW``), not only what it points to, and anything that is not a regular file."""

from __future__ import annotations

import os

import pytest

from cdk_adapters.gate.adapter_contents import open_regular_file


def test_a_regular_file_opens_and_reads(tmp_path):
    path = tmp_path / "adapter_config.json"
    path.write_bytes(b"{}")
    with open_regular_file(path) as stream:
        assert stream.read() == b"{}"


def test_a_link_to_a_regular_file_is_refused_not_followed(tmp_path):
    secret = tmp_path / "elsewhere" / "credentials"
    secret.parent.mkdir()
    secret.write_bytes(b"not the tenant's to ship")
    link = tmp_path / "adapter_model.safetensors"
    link.symlink_to(secret)
    with pytest.raises(OSError) as refused:
        open_regular_file(link)
    assert refused.value.errno == getattr(os, "ELOOP", refused.value.errno)


def test_a_swap_between_listing_and_opening_is_refused(tmp_path):
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(b"weights")
    listed = path.is_file() and not path.is_symlink()  # what the listing saw
    target = tmp_path / "other"
    target.write_bytes(b"other bytes")
    path.unlink()
    path.symlink_to(target)  # swapped in afterwards
    assert listed
    with pytest.raises(OSError):
        open_regular_file(path)


def test_what_is_not_a_regular_file_is_refused(tmp_path):
    with pytest.raises(OSError, match="is not a regular file"):
        open_regular_file(tmp_path)  # a directory opens for reading on Linux: the stat rule refuses it
