"""The boundary matrix: every way into the container that generates x adapter header x body's ``model``.

Shared by the base-access-off run (`test_serving_boundary.py`) and the base-access-on run
(`test_serving_restart.py`, after the shared server restarts with base access on).
"""

from __future__ import annotations

from adapter_server.invocation_request import ADAPTER_CHOICE_REFUSED
from tests.container.sagemaker_calls import (
    ADAPTER_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    chat_body,
    completion_body,
    register,
)
from tests.support import tiny_models as tm

A, B = "boundary-a-v1", "boundary-b-v1"
UNKNOWN = "never-registered-v1"

# (name, path, CustomAttributes, body): every way into the container that generates.
PATHS = (
    ("invocations", "/invocations", None, completion_body),
    ("route=completions", "/invocations", "route=/v1/completions", completion_body),
    ("route=chat", "/invocations", "route=/v1/chat/completions", lambda **kw: chat_body(return_token_ids=True, **kw)),
    ("direct completions", "/v1/completions", None, completion_body),
    ("direct chat", "/v1/chat/completions", None, lambda **kw: chat_body(return_token_ids=True, **kw)),
)
BODY_MODELS = {"names B": B, "names unknown": UNKNOWN, "names base": tm.TINY_BASE_MODEL_ID, "no model": None}


def send(client, path, attributes, make_body, *, header, body_model):
    headers = {}
    if header is not None:
        headers[ADAPTER_HEADER] = header
    if attributes is not None:
        headers[CUSTOM_ATTRIBUTES_HEADER] = attributes
    body = make_body() if body_model is None else make_body(model=body_model)
    return client.post(path, json=body, headers=headers)


def answer_ids(response) -> tuple[int, ...]:
    return tuple(response.json()["choices"][0]["token_ids"])


def served_by(server, references: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """Every matrix cell -> who answered: an adapter's name, 'base', or the refusal's status and kind."""
    client = server.client
    matrix = {}
    for name, path, attributes, make_body in PATHS:
        for header in (A, None):
            for body_label, body_model in BODY_MODELS.items():
                response = send(client, path, attributes, make_body, header=header, body_model=body_model)
                cell = f"{name} | header {header or 'none'} | body {body_label}"
                if response.status_code != 200:
                    error = response.json()["error"]
                    matrix[cell] = f"{response.status_code} {error['type']}"
                    if error["type"] == "adapter_choice_refused":
                        assert error["message"] == ADAPTER_CHOICE_REFUSED  # the same words for B and unknown
                    continue
                ids = answer_ids(response)
                winners = [who for who, expected in references[name].items() if expected == ids]
                assert len(winners) == 1, (cell, ids, references[name])
                matrix[cell] = winners[0]
                label = server.events("cdk_adapters.request")[-1]["adapter"]
                assert label == (None if winners[0] == "base" else winners[0]), cell
    return matrix


def references_for(server, *, with_base: bool) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each path's answer from A and from B (and the base), each asked for the SageMaker way."""
    client = server.client
    found = {}
    for name, path, attributes, make_body in PATHS:
        found[name] = {who: answer_ids(send(client, path, attributes, make_body, header=who, body_model=None)) for who in (A, B)}
        if with_base:
            found[name]["base"] = answer_ids(send(client, path, attributes, make_body, header=None, body_model=None))
        assert len(set(found[name].values())) == len(found[name]), f"{name}: answers must tell the models apart"
    return found


def expected_matrix(*, base_access: bool) -> dict[str, str]:
    expected = {}
    for name, *_ in PATHS:
        for body_label in BODY_MODELS:
            expected[f"{name} | header {A} | body {body_label}"] = A  # the header wins, as SageMaker meant
            if not base_access:  # refused before the body is read: nothing it says is looked at
                outcome = "400 adapter_required"
            elif body_label in ("names B", "names unknown"):
                outcome = "403 adapter_choice_refused"
            else:
                outcome = "base"
            expected[f"{name} | header none | body {body_label}"] = outcome
    return expected


def register_tenants(server, zoo) -> None:
    for name, kind in ((A, "good"), (B, "good-2")):
        response = register(server.client, name, zoo.adapter(kind))
        assert response.status_code == 200, response.text
