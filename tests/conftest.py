"""Offline, always: the test process (PEFT, transformers, the hub client) gets the launcher's
no-network settings before any of them is imported, so nothing a test runs even tries to reach the
Hugging Face Hub (a lookup that fails on this machine would be silent). ``VLLM_PLUGINS`` stays
out: the launcher sets it itself and refuses it from its caller's environment."""

import os

from cdk_adapters.contract.reserved_config import OFFLINE_ENVIRONMENT

os.environ.update({name: value for name, value in OFFLINE_ENVIRONMENT.items() if name != "VLLM_PLUGINS"})
