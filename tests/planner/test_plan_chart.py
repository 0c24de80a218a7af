"""`--chart`: a real PNG of the expected size, rendered headless."""

from __future__ import annotations

import struct
from pathlib import Path

from cdk_adapters.planner.chart import HEIGHT_PX, WIDTH_PX
from tests.planner.cli_run import plan

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_chart_is_a_png_of_the_expected_size(tmp_path):
    chart = tmp_path / "plan.png"
    result = plan("--num-layers", "32", "--tenants", "12", "--chart", str(chart))
    assert result.status == 0, result.err
    assert f"wrote {chart}" in result.err
    data = chart.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")  # the first chunk, as the PNG spec requires
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (WIDTH_PX, HEIGHT_PX) == (900, 500)
    assert data[-12:-4] == b"\x00\x00\x00\x00IEND"[:8]
    assert len(data) > 10_000  # lines, labels and legend, not an empty canvas


def test_no_chart_no_matplotlib(tmp_path):
    """Without --chart the command never imports matplotlib (start-up stays fast)."""
    import subprocess
    import sys

    code = (
        "import sys; from cdk_adapters.cli import main; "
        "status = main(['plan', '--num-layers', '32', '--tenants', '2', '--json']); "
        "sys.exit(status or (3 if 'matplotlib' in sys.modules or 'aws_cdk' in sys.modules else 0))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert '"recommendation"' in done.stdout
