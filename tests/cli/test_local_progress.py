"""While vLLM loads (half a minute to a few), `local` keeps a progress line on screen: the adapter
server's wait calls back at each interval. A real child process that never answers /ping stands
in for a slow vLLM; nothing else is replaced."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from cdk_adapters.local import serving
from cdk_adapters.local.serving import AdapterServer, LocalSettings, ServerFailed


def test_a_slow_start_reports_progress_at_each_interval_until_it_gives_up(tmp_path, monkeypatch):
    real_popen = subprocess.Popen

    def slow_server(command, **options):  # the same Popen, of a process that never serves
        return real_popen([sys.executable, "-c", "import time; time.sleep(60)"], **options)

    monkeypatch.setattr(serving.subprocess, "Popen", slow_server)
    server = AdapterServer(
        LocalSettings(base_model_dir=tmp_path, base_model_id="tiny", base_model_revision=None, work_dir=tmp_path)
    )
    waited: list[float] = []
    with pytest.raises(ServerFailed, match="not healthy after 2 s"):
        server.start(2.0, progress=waited.append, progress_interval_s=0.4)
    assert len(waited) >= 3 and waited == sorted(waited)
    assert all(later - earlier >= 0.4 for earlier, later in itertools.pairwise(waited))
    assert server.process.poll() is not None  # given up: the child was stopped, not left behind


def test_the_progress_line_says_it_is_working_and_how_long_it_usually_takes():
    import io

    from cdk_adapters.cli.local import _still_loading

    err = io.StringIO()
    _still_loading(err, 45.2)
    assert err.getvalue() == (
        "cdk-adapters: vLLM is still loading the base model (45 s so far; from half a minute on a "
        "quiet laptop to about three on a busy 2-core machine)\n"
    )
