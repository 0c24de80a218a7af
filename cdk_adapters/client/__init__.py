"""The runtime client: call a named adapter (or alias) of a cdk-adapters endpoint with boto3 alone.

``AdapterClient.from_parameter(endpoint.discovery_parameter_name)`` in the cloud,
``AdapterClient.from_local("http://127.0.0.1:8080")`` against ``cdk-adapters local``. It imports
boto3/botocore and `cdk_adapters.contract` only, never aws-cdk-lib, so applications can depend on
it without the construct library's weight.
"""

from cdk_adapters.client.client import AdapterClient, Completion, Stream, Target, local_runtime_client
from cdk_adapters.client.errors import (
    AdapterClientError,
    AdapterLoadFailed,
    AdapterNotFound,
    AdapterRequired,
    AdapterThrottled,
    AnswerNotJson,
    AnswerSchemaMismatch,
    BaseModelNotAllowed,
    DeadlineExceeded,
    DiscoveryError,
    EndpointWaking,
    InvalidImage,
    InvocationFailed,
    PayloadTooLarge,
    StreamInterrupted,
    StructuredOutputError,
    UnexpectedEndpoint,
)
from cdk_adapters.client.payload import image_data_url
from cdk_adapters.client.retrying import RetryPolicy, botocore_config
from cdk_adapters.client.sse import chunk_text
from cdk_adapters.client.structured import response_format, validate_answer

__all__ = [
    "AdapterClient",
    "AdapterClientError",
    "AdapterLoadFailed",
    "AdapterNotFound",
    "AdapterRequired",
    "AdapterThrottled",
    "AnswerNotJson",
    "AnswerSchemaMismatch",
    "BaseModelNotAllowed",
    "Completion",
    "DeadlineExceeded",
    "DiscoveryError",
    "EndpointWaking",
    "InvalidImage",
    "InvocationFailed",
    "PayloadTooLarge",
    "RetryPolicy",
    "Stream",
    "StreamInterrupted",
    "StructuredOutputError",
    "Target",
    "UnexpectedEndpoint",
    "botocore_config",
    "chunk_text",
    "image_data_url",
    "local_runtime_client",
    "response_format",
    "validate_answer",
]
