"""dev-server's log: written by a thread of its own, in batches (every request still gets its one
line, and the lines queued when dev-server is told to stop are all written before it exits), in
words a person reads, at the level each line deserves: an idle server says nothing at `info`."""

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
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


def _output_of(env, seconds):
    """Everything an idle dev-server (its jobs every second) prints in `seconds`."""
    binary = os.environ["HANGAR_DEV_SERVER"]
    with tempfile.TemporaryDirectory() as data_dir:
        process = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--rotation-interval", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "NO_COLOR": "1", **env},
        )
        time.sleep(seconds)
        url = None
        try:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=15)
        finally:
            process.kill()
        for line in output.splitlines():
            if line.startswith("Hangar is listening on "):
                url = line.rsplit(" ", 1)[-1]
        return output, url


def test_an_idle_dev_server_logs_what_changed_and_debug_adds_the_rest():
    quiet, url = _output_of({"RUST_LOG": "info"}, 3.5)
    assert url, quiet
    assert f"The web console: {url}/app" in quiet, quiet
    assert "HANGAR_ADMIN_TOKEN" in quiet and "HANGAR_ROOT_SERVICE_TOKEN" in quiet, "how to replace a lost token"
    for chatter in ["agent sweep", "reseal", "may be deployed", "scheduled run"]:
        assert chatter not in quiet, f"{chatter!r} at info on an idle server:\n{quiet}"

    verbose, _ = _output_of({"RUST_LOG": "debug"}, 3.5)
    assert "the broker's scheduled run is done" in verbose, verbose
    assert "agent sweep: nothing to do" in verbose, verbose


def test_a_request_line_gives_its_latency_in_hundredths_of_a_millisecond():
    binary = os.environ["HANGAR_DEV_SERVER"]
    with tempfile.TemporaryDirectory() as data_dir:
        process, url, _, _ = _start(binary, data_dir, env={"RUST_LOG": "info", "NO_COLOR": "1"})
        try:
            for _ in range(20):
                with urllib.request.urlopen(f"{url}/api/v2/ping") as response:
                    assert response.status == 204
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=15)
        latencies = re.findall(r"latency_ms=([0-9.]+)", output)
        assert len(latencies) >= 20, output
        for latency in latencies:
            assert len(latency.split(".")[-1]) <= 2 or "." not in latency, latency
