"""Every kind of adapter the gate admits is served exactly what PEFT computes, alone and in mixed batches.

The kinds: rank_pattern with alpha_pattern, all-linear, MLP-only, regex target_modules, rsLoRA, rank at
the server's --max-lora-rank (16), attention-only, q/v-only, and adapters on a grouped-query-attention
base (its own server). Adapters whose target modules differ are co-hosted, as the fleet gate allows
once the differing ones acknowledge it. The servers have 2 LoRA slots (``--max-loras 2``) for more
adapters than that, so concurrent requests are batched and scheduled across slot changes; every
answer must still equal PEFT's.
"""

from __future__ import annotations

import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from cdk_adapters.gate import (
    Acknowledgment,
    AdapterContents,
    AdapterFacts,
    CoHostedAdapter,
    check_co_hosted,
    split_acknowledged,
)
from tests.container.conftest import SERVER_LIMITS, VllmServer
from tests.container.peft_reference import peft_greedy_token_ids
from tests.container.sagemaker_calls import LONG_PROMPT, NEW_TOKENS, PROMPT, completion_body, invoke, register

LLAMA_KINDS = ("good", "rank-pattern-16", "all-linear", "mlp", "regex-targets", "rslora", "rank-16", "q-v-only")
GQA_KINDS = ("gqa", "gqa-all-linear", "gqa-k-v-only")
PROMPTS = (PROMPT, LONG_PROMPT)
CO_HOSTED = "identical-target-modules"
REASON = "each tenant's adapter was trained on its own modules; parity with PEFT is tested per kind"


def _name(kind: str) -> str:
    return f"kind-{kind}-v1"


def _served_matrix(server: VllmServer, base_dir: Path, zoo, kinds: tuple[str, ...]) -> dict[str, dict[str, bool]]:
    """Register every kind, then for each: alone (one request at a time) and batched (all requests of
    all kinds at once, each prompt twice), whether vLLM's tokens equal PEFT's for every prompt."""
    for kind in kinds:
        answer = register(server.client, _name(kind), zoo.adapter(kind))
        assert answer.status_code == 200, f"{kind}: the gate or vLLM refused it: {answer.text}"

    def tokens(client: httpx.Client, kind: str, prompt: str) -> tuple[list[int], list[int]]:
        answer = invoke(client, _name(kind), completion_body(prompt=prompt))
        assert answer.status_code == 200, answer.text
        choice = answer.json()["choices"][0]
        return choice["prompt_token_ids"], choice["token_ids"]

    alone = {(kind, prompt): tokens(server.client, kind, prompt) for kind in kinds for prompt in PROMPTS}
    expected = {
        key: peft_greedy_token_ids(base_dir, zoo.adapter(key[0]), prompt_ids, NEW_TOKENS)
        for key, (prompt_ids, _) in alone.items()
    }
    batch = [key for key in alone for _ in range(2)]
    with httpx.Client(base_url=server.url, timeout=120) as client, ThreadPoolExecutor(len(batch)) as pool:
        batched = list(pool.map(lambda key: tokens(client, *key), batch))
    matrix = {
        kind: {
            "alone": all(alone[(kind, p)][1] == expected[(kind, p)] for p in PROMPTS),
            "batched": all(out == expected[key] for key, (_, out) in zip(batch, batched) if key[0] == kind),
        }
        for kind in kinds
    }
    print("\nkind x equal to PEFT: " + repr(matrix), file=sys.stderr)
    # The adapters are not no-ops: every kind answers differently from every other on the first prompt.
    firsts = [expected[(kind, PROMPT)] for kind in kinds]
    assert len({tuple(first) for first in firsts}) == len(kinds), dict(zip(kinds, firsts))
    return matrix


def test_the_kinds_with_differing_target_modules_may_be_co_hosted_only_when_acknowledged(zoo):
    adapters = [
        CoHostedAdapter(_name(kind), AdapterFacts.from_contents(AdapterContents.from_dir(zoo.adapter(kind))).target_modules)
        for kind in LLAMA_KINDS
    ]
    differing = {p.subject for p in check_co_hosted(adapters) if p.rule == CO_HOSTED}
    # Attention-only is the majority; the others adapt other modules or fewer of them.
    assert differing == {f"adapter '{_name(k)}'" for k in ("all-linear", "mlp", "regex-targets", "q-v-only")}
    acknowledged = frozenset({CO_HOSTED})
    rows = [
        CoHostedAdapter(a.name, a.target_modules, acknowledged if f"adapter '{a.name}'" in differing else frozenset())
        for a in adapters
    ]
    open_problems, findings = split_acknowledged(
        check_co_hosted(rows), {subject: Acknowledgment(CO_HOSTED, REASON) for subject in differing}
    )
    assert open_problems == [] and {f.problem.subject for f in findings} == differing


@pytest.mark.vllm
def test_every_admitted_llama_kind_serves_what_peft_computes_alone_and_in_mixed_batches(served, zoo):
    assert int(SERVER_LIMITS["MAX_LORAS"]) < len(LLAMA_KINDS)
    matrix = _served_matrix(served, zoo.base_dir, zoo, LLAMA_KINDS)
    assert all(all(row.values()) for row in matrix.values()), matrix


@pytest.fixture(scope="module")
def gqa_served(zoo, tmp_path_factory):
    """A second server, on the grouped-query-attention base (one key/value head): its own start-up,
    stopped when this module is done so it does not compete with the shared server for the cores."""
    root = tmp_path_factory.mktemp("vllm-gqa-server")
    server = VllmServer(Path(shutil.copytree(zoo.gqa_base_dir, root / "model")), root / "state", root)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.mark.vllm
def test_adapters_on_a_grouped_query_attention_base_serve_what_peft_computes(gqa_served, zoo):
    assert int(SERVER_LIMITS["MAX_LORAS"]) < len(GQA_KINDS)
    matrix = _served_matrix(gqa_served, zoo.gqa_base_dir, zoo, GQA_KINDS)
    print(f"GQA server start: {gqa_served.start_seconds[0]:.1f} s", file=sys.stderr)
    assert all(all(row.values()) for row in matrix.values()), matrix
