"""Self-test kernels: small real kernels that exercise the build and runtime paths."""
