"""What runs the base model: compute, instance types and pools, networking, scaling, the rolling
update, vLLM options, the model data, the container image and the log groups."""
