"""Stop signals become `Interrupted` (exit 128+n, `errors.ExitCode`), or a stop event while requests are in flight."""

from __future__ import annotations

import asyncio
import os
import signal

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
