"""The closed vocabularies of the run-directory format (DESIGN.md)."""

from __future__ import annotations

ANOMALY_KINDS = (
    "lost-write",
    "divergence",
    "inconsistent-offset",
    "duplicate",
    "uncommitted-read",
    "aborted-read",
    "nonmonotonic-poll",
    "poll-skip",
    "hw-regression",
)
PROTOCOLS = ("0.10", "0.11", "2.0", "latest")
OP_TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = ("send", "poll")
# "stop" (SIGTERM, a clean shutdown) is isrlab's addition to DESIGN.md's list.
NEMESIS_FS = ("kill", "start", "stop", "pause", "resume", "power-cycle", "partition", "heal")
ROLES = ("leader", "follower", "none")
FINAL_PROCESS = "final"
NEMESIS_PROCESS = "nemesis"
