"""Capturing requests and responses to S3 (the endpoint config's ``DataCaptureConfig``).

Unconfirmed for endpoints with inference components: whether SageMaker captures their traffic at
all, and whether a captured record names the adapter component invoked. SageMaker Model Monitor,
the usual reader of these records, is documented as closed to new customers. Captured bodies are
prompts and completions: treat the bucket like the traffic itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.private.iam_conditions import kms_via_s3
from cdk_adapters.problems import Problem

CAPTURE_MODES = ("Input", "Output", "InputAndOutput")
"""``CaptureMode``'s values (SageMaker API ``CaptureOption``)."""
SAMPLING_RANGE = (0, 100)
REASON_CAPTURE_PREFIX = (
    "SageMaker writes one object per captured batch under the data-capture prefix with keys it "
    "chooses (endpoint, variant, date), so the role may write any key under that prefix only."
)


@dataclass(frozen=True)
class DataCapture:
    """Capture a sample of requests and responses into `bucket` under `prefix`."""

    bucket: s3.IBucket
    """Where captured records go."""
    sampling_percentage: int
    """Share of requests captured, 0 to 100 (required: CloudFormation needs it)."""
    prefix: str = "data-capture/"
    """Key prefix under `bucket`. Default ``data-capture/``."""
    mode: str = "InputAndOutput"
    """``Input``, ``Output`` or ``InputAndOutput``. Default both."""
    encryption_key: kms.IKey | None = None
    """KMS key for the captured objects. Default: the bucket's own encryption."""
    json_content_types: tuple[str, ...] = ("application/json",)
    """Content types recorded as JSON text rather than base64. Default ``application/json``."""

    def problems(self, subject: str) -> list[Problem]:
        found: list[Problem] = []
        low, high = SAMPLING_RANGE
        value = self.sampling_percentage
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            found.append(
                Problem(subject, "data_capture.sampling_percentage", f"must be an integer from {low} to {high}, got {value!r}")
            )
        if self.mode not in CAPTURE_MODES:
            found.append(Problem(subject, "data_capture.mode", f"must be one of {', '.join(CAPTURE_MODES)}, got {self.mode!r}"))
        if not isinstance(self.prefix, str) or self.prefix.startswith("/") or (self.prefix and not self.prefix.endswith("/")):
            found.append(
                Problem(subject, "data_capture.prefix", f"must be a key prefix ending in '/' (or ''), got {self.prefix!r}")
            )
        types = self.json_content_types
        if not isinstance(types, tuple) or not types or not all(isinstance(t, str) and "/" in t for t in types):
            found.append(
                Problem(subject, "data_capture.json_content_types", f"must be a non-empty tuple of content types, got {types!r}")
            )
        return found

    def render(self) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty:
        config = sagemaker.CfnEndpointConfig
        modes = ("Input", "Output") if self.mode == "InputAndOutput" else (self.mode,)
        return config.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=self.sampling_percentage,
            destination_s3_uri=self.bucket.s3_url_for_object(self.prefix.rstrip("/")),
            kms_key_id=self.encryption_key.key_arn if self.encryption_key is not None else None,
            capture_options=[config.CaptureOptionProperty(capture_mode=mode) for mode in modes],
            capture_content_type_header=config.CaptureContentTypeHeaderProperty(json_content_types=list(self.json_content_types)),
        )

    def statements(self) -> list[iam.PolicyStatement]:
        """What the execution role needs to write the records (SageMaker writes them as the role)."""
        found = [
            iam.PolicyStatement(
                sid="WriteDataCapture", actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{self.prefix}*")]
            )
        ]
        if self.encryption_key is not None:
            found.append(
                iam.PolicyStatement(
                    sid="EncryptDataCapture",
                    actions=["kms:GenerateDataKey", "kms:Encrypt"],
                    resources=[self.encryption_key.key_arn],
                    conditions=kms_via_s3(),
                )
            )
        return found
