"""The contract between the constructs, the serving container and the runtime client.

Standard library only: the serving image copies this package, and a runtime client imports it with
boto3 alone. Each module is one agreement both sides read from the same definition (cf. vLLM's one
``protocol.py`` per feature), so nothing is encoded on one side and re-typed on the other.

* `discovery` - the record that tells a client which endpoint and component serve an adapter.
* `request_metrics` - the per-request log line, the CloudWatch metrics (EMF) embedded in it, and the
  container variables that configure them.
* `error_kinds` - the ``error.type`` of each refusal the container sends, by which the client types it.
* `runtime_api` - what one invocation must respect: InvokeEndpoint's payload limit, the ``route=``
  custom attribute.
"""
