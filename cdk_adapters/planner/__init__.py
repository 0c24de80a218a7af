"""``cdk-adapters plan``: does consolidation pay, how big must the endpoint be, will the adapters fit?

One module per concept: `prices` (shipped and user prices), `throughput` (tokens/s per instance),
`traffic` (tenant load), `gpu_lora`, `lora_kernels` and `swaps` (what LoRA costs on the GPU), `cost` (dedicated vs shared, break-even), `lora_memory` (vLLM 0.31's LoRA
allocation rule), `fit` (GPU and host memory budget), `manifest_inputs` (what a gated manifest
tells them), `endpoint_plan` (the whole plan from the command's inputs), `recommendation`, `report` (table and JSON) and `chart` (matplotlib, only for
``--chart``). Standard library only, apart from the chart, so the command starts fast.
"""
