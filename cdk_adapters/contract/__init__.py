"""The contract between the constructs, the serving container and the runtime client.

Standard library only: the serving image copies this package, and a runtime client imports it with
boto3 alone. Each module is one agreement both sides read from the same definition (cf. vLLM's one
``protocol.py`` per feature), so nothing is encoded on one side and re-typed on the other.

* `discovery` - the record that tells a client which endpoint and component serve an adapter
  (its canary in `canary_record`).
* `request_metrics` - the per-request log line, the CloudWatch metrics (EMF) embedded in it, and the
  container variables that configure them.
* `error_kinds` - the ``error.type`` of each refusal the container sends, by which the client types it.
* `runtime_api` - what one invocation must respect: InvokeEndpoint's payload limit, the ``route=``
  custom attribute.
* `serving_env` - every other container variable the construct renders and the container reads,
  their value codec, and the serving policy's rules (a revision needs a base model id).
* `tenant_limits` - fair share and each adapter's limits, and their container variables.
* `reserved_config` - the vLLM flags (every spelling) and variables configuration may not set.
* `adapter_names` - how adapter names compare (`adapter_name_key`) and form component names.
* `serving_image` - the pinned vLLM image, its port and the AMI that runs it.
* `s3_url` - the one parser for ``s3://bucket/key`` URLs (locations, artifacts, the record's serving reference).
* `env_values` - the strict ``true``/``false`` reader every codec shares.

Nothing outside this package spells a ``CDK_ADAPTERS_*`` variable, an error kind or a reserved
flag (a test scans the source for them). The serving image copies this folder whole.
"""
