"""Client settings that are secrets: they reach the client in memory and are never
written -- not in run.json, a report, an index, JUnit, `--json` or a log.

A setting is secret when its name says so, in Kafka's and librdkafka's naming
(`sasl.password`, `ssl.key.password`, `ssl.keystore.password`,
`sasl.oauthbearer.client.secret`, `sasl.jaas.config`, which carries a password
inline) and kafka-python's (`sasl_plain_password`, `ssl_password`,
`sasl_oauth_token_provider`).
"""

from __future__ import annotations

from typing import Any

# Substrings of a setting's name (lower case, `.` and `_` alike) that make it secret.
SECRET_MARKERS = ("password", "secret", "token", "jaas", "ssl.key.", "credential",
                  "private")
REDACTED = "<redacted>"


def is_secret(key: str) -> bool:
    name = key.lower().replace("_", ".")
    return any(m in name for m in SECRET_MARKERS)


def redacted(config: dict[str, Any]) -> dict[str, Any]:
    """The settings with every secret's value replaced by REDACTED."""
    return {k: REDACTED if is_secret(k) else v for k, v in config.items()}


def redacted_workload(workload: dict[str, Any]) -> dict[str, Any]:
    """A scenario's workload as it may be written: its client `config` redacted."""
    if not isinstance(workload.get("config"), dict):
        return workload
    return {**workload, "config": redacted(workload["config"])}
