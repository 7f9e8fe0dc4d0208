"""Manifests: YAML documents describing the desired objects.

    loader.py     find the files, read and check them, link them: ``load``
    documents.py  one document: envelope, metadata, spec -> request template
    links.py      references and dependsOn name existing manifests
    wording.py    how errors are worded
    manifest.py   ``Manifest`` and ``ManifestSet``
    yamlio.py     safe, fast YAML reading with positions
"""

from govsync.manifests.loader import load
from govsync.manifests.manifest import Manifest, ManifestSet

__all__ = ["Manifest", "ManifestSet", "load"]
