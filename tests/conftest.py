"""Offline, always: the test process (PEFT, transformers, the hub client) gets the same no-network
settings the serving launcher gives vLLM, before any of them is imported, so nothing a test runs
even tries to reach the Hugging Face Hub (a lookup that fails on this machine would be silent)."""

import os

from cdk_adapters.contract.reserved_config import OFFLINE_ENVIRONMENT

os.environ.update(OFFLINE_ENVIRONMENT)
