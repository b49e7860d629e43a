"""The controller process: an asyncio shell around ControllerCore.

    python -m broker.controller --listen HOST:PORT --data-dir DIR --config FILE
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from .admin import AdminRequests
from .config import BrokerConfig, ControllerConfig
from .controller_core import ControllerCore
from .process import common_args, load_cluster_config, run_main, serve

STATE_FILE = "controller-state.json"
TICK_S = 0.02


def _now() -> float:
    return time.monotonic() * 1000


class Controller:
    def __init__(self, cluster: dict[str, Any], data_dir: Path) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        ccfg = ControllerConfig.from_dict(cluster.get("controller"))
        bcfg = BrokerConfig.from_dict(cluster.get("broker"))
        saved = None
        if (data_dir / STATE_FILE).exists():
            saved = json.loads((data_dir / STATE_FILE).read_text())
        self.core = ControllerCore(cluster["topics"], ccfg.broker_session_timeout_ms,
                                   bcfg.unclean_leader_election_enable, saved, _now(),
                                   protocol=cluster["protocol"],
                                   min_insync_replicas=bcfg.min_insync_replicas)
        self.admin = AdminRequests("controller", self.core.status, self._request)
        self.admin.events.add("started", restarted=saved is not None)

    def _after(self) -> None:
        """Publish the core's new events and persist its state when it changed."""
        for ev in self.core.events:
            self.admin.events.add(ev.pop("type"), **ev)
        self.core.events.clear()
        if self.core.dirty:
            self.core.dirty = False
            path = self.data_dir / STATE_FILE
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                json.dump(self.core.snapshot(), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)

    async def _request(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A broker's request (admin.AdminRequests answers the shell's own)."""
        try:
            return self.core.handle(msg, _now())
        finally:
            self._after()

    async def ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.core.tick(_now())
            self._after()


async def amain(args: Any, stop: asyncio.Event) -> None:
    ctl = Controller(load_cluster_config(args.config), args.data_dir)
    server = await serve(args.listen, ctl.admin.handle)
    ticker = asyncio.create_task(ctl.ticker())
    await stop.wait()
    ticker.cancel()
    server.close()


def main() -> None:
    args = common_args("isrlab reference controller").parse_args()
    run_main("controller", lambda stop: amain(args, stop))


if __name__ == "__main__":
    main()
