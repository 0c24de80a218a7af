"""Every benchmark imports the way `make bench` runs it (``python -m benchmarks.<name>`` from the
repository root, nothing else on the path), so a reordered import cannot break one unseen."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(path.stem for path in (REPO_ROOT / "benchmarks").glob("bench_*.py"))


def test_there_are_benchmarks():
    assert len(BENCHMARKS) >= 10


@pytest.mark.parametrize("name", BENCHMARKS)
def test_a_benchmark_module_imports_as_make_bench_runs_it(name):
    result = subprocess.run(
        [sys.executable, "-c", f"import benchmarks.{name}"],
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
