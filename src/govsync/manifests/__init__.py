"""Manifests: YAML documents describing the desired objects."""

from govsync.manifests.loader import Manifest, ManifestSet, find_files, load

__all__ = ["Manifest", "ManifestSet", "find_files", "load"]
