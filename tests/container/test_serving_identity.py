"""One adapter identity, whichever name SageMaker sends, on the real server.

What SageMaker passes the container is unconfirmed: the registration's ``name``, the
``X-Amzn-SageMaker-Adapter-Alias`` header and the invocation's adapter header may each carry the
component name (``<prefix>-<adapter>``) or the adapter's own name. The shared server is told the
component prefix, as an endpoint's container is, and each hypothesis below drives one adapter from
registration through invocation to the limit, the capture record, the request log's metrics
dimension, the Prometheus usage row and removal. Each identity adapter's limit (``max_n`` 2) and
redacted capture are rendered under its adapter name only, as the construct renders them: a key
that missed them would let ``n`` 3 through and write the prompt.
"""

from __future__ import annotations

import pytest

from cdk_adapters.contract import error_kinds, request_metrics
from cdk_adapters.contract.capture_record import MARKER, REDACTED, decode_line
from cdk_adapters.usage.prometheus import parse_prometheus
from tests.container.conftest import COMPONENT_PREFIX, IDENTITY_MAX_N
from tests.container.sagemaker_calls import completion_body, invoke, register, unregister

pytestmark = pytest.mark.vllm

HYPOTHESES = {
    # adapter: (registration name, alias header, the names invocations may carry)
    "component name everywhere": ("ida-v1", f"{COMPONENT_PREFIX}-ida-v1", None, (f"{COMPONENT_PREFIX}-ida-v1", "ida-v1")),
    "adapter name everywhere": ("idb-v1", "idb-v1", None, ("idb-v1", f"{COMPONENT_PREFIX}-IDB-v1")),
    "alias header only": ("idc-v1", "ic-7f3a9c", f"{COMPONENT_PREFIX}-idc-v1", (f"{COMPONENT_PREFIX}-idc-v1", "ic-7f3a9c")),
}


def _new_lines(server, offset: int) -> list[str]:
    return server.log_path.read_text(errors="replace")[offset:].splitlines()


@pytest.mark.parametrize("hypothesis", list(HYPOTHESES))
def test_every_per_adapter_feature_keys_by_one_identity(served, zoo, hypothesis):
    adapter, name, alias, invoked_as = HYPOTHESES[hypothesis]
    client = served.client
    headers = {"X-Amzn-SageMaker-Adapter-Alias": alias} if alias else {}
    registered = register(client, name, zoo.adapter("good"), **headers)
    assert registered.status_code == 200, registered.text
    listed = {entry["name"] for entry in client.get("/adapters").json()["adapters"]}
    assert adapter in listed and name not in listed - {adapter}

    offset = len(served.log_path.read_text(errors="replace"))
    answers = [invoke(client, given, completion_body(prompt="Invoices are due")) for given in invoked_as]
    assert [a.status_code for a in answers] == [200] * len(invoked_as), [a.text for a in answers]
    assert len({tuple(a.json()["choices"][0]["token_ids"]) for a in answers}) == 1  # one adapter, both names

    # The limit rendered under the adapter's name applies, whichever name the request carries.
    for given in invoked_as:
        refused = invoke(client, given, completion_body(n=IDENTITY_MAX_N + 1, temperature=1.0))
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert (error["type"], error["limit"], error["adapter"]) == (error_kinds.TOO_MANY_SEQUENCES, "max_n", adapter)
    assert invoke(client, invoked_as[0], completion_body(n=IDENTITY_MAX_N, temperature=1.0)).status_code == 200

    lines = _new_lines(served, offset)
    requests = list(served.events("cdk_adapters.request"))[-(2 * len(invoked_as) + 1) :]
    assert {e["adapter"] for e in requests} == {adapter}
    assert {e[request_metrics.ADAPTER_DIMENSION] for e in requests} == {adapter}  # the EMF dimension alarms query
    captured = [decode_line(line)[0] for line in lines if MARKER in line]
    assert [record.adapter for record in captured] == [adapter] * (2 * len(invoked_as) + 1)
    assert all(record.case is None or record.case.get("prompt") == REDACTED for record in captured)
    assert "Invoices are due" not in "\n".join(line for line in lines if MARKER in line)

    usage = {row.adapter: row for row in parse_prometheus(client.get("/metrics").text)}
    assert usage[adapter].requests >= 2 * len(invoked_as) + 1 and name not in usage.keys() - {adapter}

    assert unregister(client, invoked_as[-1]).status_code == 200
    gone = invoke(client, invoked_as[0])
    assert (gone.status_code, gone.json()["error"]["type"]) == (404, error_kinds.ADAPTER_NOT_FOUND)


def test_an_unprefixed_adapter_keeps_the_default_limit(served, zoo):
    """The default ``max_n`` (4) for an adapter with no limits of its own: 4 sequences pass, 5 do not."""
    client = served.client
    assert register(client, "defaults-v1", zoo.adapter("good")).status_code == 200
    assert invoke(client, "defaults-v1", completion_body(n=4, temperature=1.0)).status_code == 200
    refused = invoke(client, "defaults-v1", completion_body(n=5, temperature=1.0))
    assert (refused.status_code, refused.json()["error"]["limit"]) == (400, "max_n")
    batched = invoke(client, "defaults-v1", completion_body(prompt=["a", "b", "c"], n=2, temperature=1.0))
    assert (batched.status_code, batched.json()["error"]["type"]) == (400, error_kinds.TOO_MANY_SEQUENCES)
    assert "6 sequences" in batched.json()["error"]["message"]
