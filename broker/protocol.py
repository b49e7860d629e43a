"""The protocol versions the reference broker models (docs/protocol-versions.md).

The broker is stdlib-only and ships alone (Docker image), so the names of its
versions live here; `contract` re-exports them for the rest of isrlab.
"""

from __future__ import annotations

# Oldest first; `latest` is the newest row.
PROTOCOLS = ("0.10", "0.11", "2.0", "latest")
