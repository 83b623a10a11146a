"""Operator internals behind the public API ``gcmoe_runtime.moe``: kernel argument values from the
workspace layout (``values``) and host-side expectations used by the GPU tests (``expect``)."""
