"""Stop signals become `Interrupted` (exit 128+n, `errors.ExitCode`), or a stop event while requests are in flight."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from evalctl.errors import ExitCode
from evalctl.signals import Interrupted, Shutdown


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, ExitCode.TERMINATED), (signal.SIGINT, ExitCode.INTERRUPTED)])
def test_signal_in_plain_code_raises_interrupted(sig, code):
    shutdown = Shutdown()
    with pytest.raises(Interrupted) as exc, shutdown.install():
        os.kill(os.getpid(), sig)
        signal.sigtimedwait([], 0)  # give the handler a bytecode boundary
    assert exc.value.exit_status == code and shutdown.requested
    assert signal.getsignal(sig) is not shutdown._handle  # previous handler restored


def test_signal_during_requests_sets_the_stop_event_then_a_second_one_raises():
    shutdown = Shutdown()

    async def requests() -> bool:
        stop = asyncio.Event()
        with shutdown.graceful(stop):
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(stop.wait(), timeout=5)
            with pytest.raises(Interrupted):
                os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(0.1)
        return stop.is_set()

    with shutdown.install():
        assert asyncio.run(requests())
    with pytest.raises(Interrupted):
        shutdown.check()


def test_one_signal_stops_the_requests_of_every_launch_side_by_side():
    """Launches side by side each send from their own thread and loop: one signal sets both loops' stop events."""
    shutdown = Shutdown()
    ready = threading.Barrier(3)
    stopped: list[bool] = []

    def launch() -> None:
        async def requests() -> bool:
            stop = asyncio.Event()
            with shutdown.graceful(stop):
                await asyncio.get_running_loop().run_in_executor(None, ready.wait)
                await asyncio.wait_for(stop.wait(), timeout=5)
            return stop.is_set()

        stopped.append(asyncio.run(requests()))

    with shutdown.install():
        threads = [threading.Thread(target=launch) for _ in range(2)]
        for t in threads:
            t.start()
        ready.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        for t in threads:
            t.join(10)
    assert stopped == [True, True] and shutdown.requested
