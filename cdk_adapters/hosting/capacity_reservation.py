"""Launching the endpoint's instances only into an ML capacity reservation (the variant's
``CapacityReservationConfig``).

SageMaker's one preference, ``capacity-reservations-only``, means no fallback: when the
reservation has no free instance, the instance fails to launch. So ``Instances.max_count`` (and
every scale-out to it) must fit the reservation's free instances of this variant's instance type;
the reservation's size is not known at synth, so that is the user's to keep true.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import Token
from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.problems import Problem

PREFERENCE = "capacity-reservations-only"
"""``CapacityReservationPreference``'s only value (SageMaker API)."""
ARN_PATTERN = re.compile(r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z0-9\-]{1,14}/.*")
"""``MlReservationArn``'s pattern, 20 to 258 characters (SageMaker API)."""
ARN_LENGTH_RANGE = (20, 258)


@dataclass(frozen=True)
class CapacityReservation:
    """Launch only into the ML capacity reservation `ml_reservation_arn`."""

    ml_reservation_arn: str
    """The reservation's ARN (``arn:aws:sagemaker:<region>:<account>:<type>/<id>``); a token is accepted."""

    def problems(self, subject: str) -> list[Problem]:
        arn = self.ml_reservation_arn
        if isinstance(arn, str) and Token.is_unresolved(arn):
            return []
        low, high = ARN_LENGTH_RANGE
        if isinstance(arn, str) and low <= len(arn) <= high and ARN_PATTERN.fullmatch(arn):
            return []
        return [
            Problem(
                subject,
                "instances.capacity_reservation.ml_reservation_arn",
                f"must be an ML capacity reservation ARN like 'arn:aws:sagemaker:us-east-1:123456789012:"
                f"reservation/abc' ({low} to {high} characters), got {arn!r}",
            )
        ]

    def render(self) -> sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty:
        return sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
            capacity_reservation_preference=PREFERENCE, ml_reservation_arn=self.ml_reservation_arn
        )
