"""The controller process: an asyncio shell around the sans-IO ControllerCore.

    python -m broker.controller --listen HOST:PORT --data-dir DIR --config FILE

The shell owns the socket, the state file, the event log and the wall clock; it
carries out the effects the core returns, in order, and feeds it requests and
ticks. Admin requests are answered by admin.AdminRequests.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from .admin import AdminRequests
from .broker_core import Respond
from .config import BrokerConfig, ControllerConfig
from .controller_core import ControllerCore, ControllerEffect, WriteControllerState
from .partition import Event
from .process import common_args, load_cluster_config, now_ms, run_main

STATE_FILE = "controller-state.json"
TICK_S = 0.02


class Controller:
    def __init__(self, cluster: dict[str, Any], data_dir: Path) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        ccfg = ControllerConfig.from_dict(cluster.get("controller"), cluster["protocol"])
        bcfg = BrokerConfig.from_dict(cluster.get("broker"), cluster["protocol"])
        saved = None
        if (data_dir / STATE_FILE).exists():
            saved = json.loads((data_dir / STATE_FILE).read_text())
        self.core = ControllerCore(cluster["topics"], ccfg.broker_session_timeout_ms,
                                   bcfg.unclean_leader_election_enable, saved, now_ms(),
                                   protocol=cluster["protocol"],
                                   min_insync_replicas=bcfg.min_insync_replicas,
                                   elr=ccfg.eligible_leader_replicas_version >= 1,
                                   group_config={
                                       "initial_rebalance_delay_ms":
                                           bcfg.group_initial_rebalance_delay_ms,
                                       "min_session_timeout_ms": bcfg.group_min_session_timeout_ms,
                                       "max_session_timeout_ms": bcfg.group_max_session_timeout_ms},
                                   member_id_seed=os.urandom(4).hex())
        # A consumer group's JoinGroup and SyncGroup are answered when the group
        # moves on, maybe by a tick or another request: each request waits here.
        self._next_rid = 0
        self._replies: dict[int, asyncio.Future] = {}
        self.admin = AdminRequests("controller", os.urandom(6).hex(), self.core.status,
                                   self._request, cluster.get("cluster_id"))
        self.perform(self.core.start(now_ms()))

    def perform(self, effects: list[ControllerEffect]) -> dict[str, Any] | None:
        """Carry out the core's effects; the answer they give, if any."""
        answer = None
        for eff in effects:
            if isinstance(eff, Event):
                self.admin.events.add(eff.type, **eff.fields)
            elif isinstance(eff, WriteControllerState):
                self._write_state(eff.state)
            elif isinstance(eff, Respond):
                fut = self._replies.pop(eff.rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(eff.resp)
                answer = eff.resp
        return answer

    def _write_state(self, state: dict[str, Any]) -> None:
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    async def _request(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """A broker's request (admin.AdminRequests answers the shell's own)."""
        rid = self._next_rid
        self._next_rid += 1
        fut = asyncio.get_running_loop().create_future()
        self._replies[rid] = fut
        try:
            self.perform(self.core.on_request(rid, msg, now_ms()))
            return await fut
        finally:
            self._replies.pop(rid, None)

    async def ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.perform(self.core.tick(now_ms()))


async def amain(args: Any, stop: asyncio.Event) -> None:
    ctl = Controller(load_cluster_config(args.config), args.data_dir)
    await ctl.admin.listener.start(args.listen)
    ticker = asyncio.create_task(ctl.ticker())
    await stop.wait()
    ticker.cancel()
    ctl.admin.listener.close()


def main() -> None:
    args = common_args("isrlab reference controller").parse_args()
    run_main("controller", lambda stop: amain(args, stop))


if __name__ == "__main__":
    main()
