"""Model manifests: the YAML schema (pydantic v2), its shape envelope, and the strict loader.

Public API: ``load_manifest(path) -> Manifest``, ``ManifestError`` (attributes file, field, value,
limit, line, problems), the schema classes, and ``manifest_from_text`` / ``manifest_from_data``.
"""
from gcmoe_build.manifest.errors import ManifestError, Problem
from gcmoe_build.manifest.loader import load_manifest, manifest_from_data, manifest_from_text
from gcmoe_build.manifest.schema import (
    ARCHS,
    Activation,
    Device,
    Manifest,
    ModelShape,
    Recipe,
    SharedExperts,
    Target,
)

__all__ = [
    "ARCHS", "Activation", "Device", "Manifest", "ManifestError", "ModelShape", "Problem", "Recipe",
    "SharedExperts", "Target", "load_manifest", "manifest_from_data", "manifest_from_text",
]
