# SPDX-License-Identifier: MIT
"""Fixtures the binding's test modules share."""
import signal
import threading

import pytest


@pytest.fixture
def sigint_raises():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test,
    whatever the process inherited: a background job (`make check &`,
    a parallel make-in.sh) starts with SIGINT ignored.  Skips off the
    main thread, which alone receives signals."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
