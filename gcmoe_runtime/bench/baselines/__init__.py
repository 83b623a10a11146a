"""Baselines that need none of our kernels (each registers itself with `gcmoe_runtime.bench.impl`)."""
