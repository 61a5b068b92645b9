"""dev-server holds its embedded store alone unless told to share it: a second server on the same
data directory is refused at once with the reason, and the first serves on; with
--shared-store both serve the same data."""

import json
import os
import signal
import subprocess
import tempfile
import urllib.request

from conftest import _start


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=15)


def _organizations(url: str, token: str) -> list[str]:
    request = urllib.request.Request(f"{url}/api/v2/organizations", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request) as response:
        return [org["id"] for org in json.load(response)["data"]]


def _create_organization(url: str, token: str, name: str) -> None:
    body = {"data": {"type": "organizations", "attributes": {"name": name, "email": f"{name}@example.com"}}}
    request = urllib.request.Request(
        f"{url}/api/v2/organizations",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/vnd.api+json"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 201


def test_a_second_dev_server_on_the_same_data_is_refused_and_the_first_serves_on():
    binary = os.environ["HANGAR_DEV_SERVER"]
    with tempfile.TemporaryDirectory() as data_dir:
        first, url, token, _ = _start(binary, data_dir)
        try:
            second = subprocess.run(
                [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode != 0, second.stdout
            assert "is in use by another process" in second.stderr, second.stderr
            assert "--shared-store" in second.stderr, second.stderr
            _create_organization(url, token, "still-serving")
            assert "still-serving" in _organizations(url, token)
        finally:
            _stop(first)


def test_two_dev_servers_told_to_share_the_data_serve_it_both():
    binary = os.environ["HANGAR_DEV_SERVER"]
    with tempfile.TemporaryDirectory() as data_dir:
        first, first_url, token, _ = _start(binary, data_dir, "--shared-store")
        try:
            # The site-admin token is stored once, by the first: the second prints none.
            second = subprocess.Popen(
                [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--shared-store"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env={**os.environ, "RUST_LOG": "warn"},
            )
            try:
                second_url = next(
                    line.rsplit(" ", 1)[-1].strip()
                    for line in second.stdout
                    if line.startswith("Hangar is listening on ")
                )
                _create_organization(first_url, token, "made-by-first")
                assert "made-by-first" in _organizations(second_url, token)
                _create_organization(second_url, token, "made-by-second")
                assert "made-by-second" in _organizations(first_url, token)
            finally:
                _stop(second)
        finally:
            _stop(first)
