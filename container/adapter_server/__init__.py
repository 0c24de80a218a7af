"""The serving side of cdk-adapters: a launcher and an ASGI middleware around stock vLLM.

`launch` turns the container environment into one vLLM command line; `middleware` is installed
with vLLM's ``--middleware`` flag and makes vLLM speak SageMaker's adapter contract safely
(register-time gate, idempotent and persisted registrations, no silent base-model fallback,
per-adapter request log and metrics). Nothing in vLLM is patched.
"""
