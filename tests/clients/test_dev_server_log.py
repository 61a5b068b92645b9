"""dev-server's request log is written by a thread of its own, in batches: every request still
gets its one line, and the lines queued when dev-server is told to stop are all written before
it exits."""

import os
import signal
import tempfile
import threading
import urllib.request

from conftest import _start

REQUESTS = 1500


def test_every_request_is_logged_once_even_at_shutdown():
    binary = os.environ["HANGAR_DEV_SERVER"]
    with tempfile.TemporaryDirectory() as data_dir:
        # JSON lines, so each request's line can be told apart from the start-up messages.
        process, url, _, _ = _start(binary, data_dir, env={"RUST_LOG": "info", "NO_COLOR": "1"})
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        try:
            for _ in range(REQUESTS):
                with urllib.request.urlopen(f"{url}/api/v2/ping") as response:
                    assert response.status == 204
        finally:
            # Stopped at once after the last answer: its line may still be queued.
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
            reader.join(timeout=15)
        logged = [line for line in lines if "/api/v2/ping" in line and "request" in line]
        assert len(logged) == REQUESTS, f"{len(logged)} request lines for {REQUESTS} requests"
        assert any("shutting down" in line for line in lines)


def test_a_log_read_through_a_pipe_has_no_colour_codes():
    binary = os.environ["HANGAR_DEV_SERVER"]
    with tempfile.TemporaryDirectory() as data_dir:
        # An empty NO_COLOR does not ask for plain text: only stdout not being a terminal does.
        process, url, _, _ = _start(binary, data_dir, env={"RUST_LOG": "info", "NO_COLOR": ""})
        try:
            with urllib.request.urlopen(f"{url}/api/v2/ping") as response:
                assert response.status == 204
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=15)
        logged = [line for line in output.splitlines() if "/api/v2/ping" in line]
        assert logged, "no line for the request"
        assert not any("\x1b[" in line for line in output.splitlines()), logged
