"""Starts a dev-server binary (path in HANGAR_DEV_SERVER, built by tests/run) on a free port
with a fresh data directory, and hands tests its URL and site-admin token; for the credential
broker's clients (hvac, the bao CLI), its URL and a root token known in advance (set with
HANGAR_ROOT_SERVICE_TOKEN), and the AWS emulator's endpoint."""

import os
import secrets
import signal
import subprocess
import tempfile
import threading
import time

import pytest


class Hangar:
    def __init__(self, url: str, admin_token: str, data_dir: str, certificate: str | None):
        self.url = url
        self.admin_token = admin_token
        self.data_dir = data_dir
        self.certificate = certificate


def _start(binary: str, data_dir: str, *flags: str, env=None) -> tuple[subprocess.Popen, str, str, str | None]:
    process = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "RUST_LOG": "warn", **(env or {})},
    )
    token, url, certificate = None, None, None
    timer = threading.Timer(30, process.kill)
    timer.start()
    try:
        for line in process.stdout:
            if line.startswith("Site-admin token"):
                token = line.rsplit(" ", 1)[-1].strip()
            if "SSL_CERT_FILE=" in line:
                certificate = line.split("SSL_CERT_FILE=", 1)[1].strip()
            if line.startswith("Hangar is listening on "):
                url = line.rsplit(" ", 1)[-1].strip()
                break
    finally:
        timer.cancel()
    if not (token and url):
        process.kill()
        raise RuntimeError("dev-server did not start (no token or address printed)")
    return process, url, token, certificate


def _serve(*flags: str, env=None):
    binary = os.environ.get("HANGAR_DEV_SERVER")
    if not binary:
        pytest.fail("HANGAR_DEV_SERVER must name the dev-server binary (tests/run sets it)")
    with tempfile.TemporaryDirectory() as data_dir:
        process, url, token, certificate = _start(binary, data_dir, *flags, env=env)
        try:
            yield Hangar(url, token, data_dir, certificate)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)


@pytest.fixture
def hangar():
    yield from _serve()


@pytest.fixture
def hangar_tls():
    """dev-server over https with its self-signed certificate, as the Terraform CLI needs."""
    yield from _serve("--tls")


@pytest.fixture
def hangar_tls_vcs():
    """The same, allowed to call a VCS stand-in on 127.0.0.1 (HANGAR_VCS_ALLOWED_NETWORKS)."""
    yield from _serve("--tls", env={"HANGAR_VCS_ALLOWED_NETWORKS": "127.0.0.0/8"})


@pytest.fixture
def settled():
    """Waits until a module version is no longer `pending` and returns its status: dev-server
    answers an upload's PUT once the archive is stored and ingests it after, as AWS does."""

    def wait(client, module, version: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            status = client.registry_modules.read_version(module, version).status
            if status != "pending":
                return status
            if time.monotonic() > deadline:
                pytest.fail(f"version {version} still pending after {timeout} s")
            time.sleep(0.1)

    return wait


@pytest.fixture
def moto_endpoint():
    endpoint = os.environ.get("HANGAR_TEST_MOTO_ENDPOINT")
    if not endpoint:
        if os.environ.get("CI") == "true":
            pytest.fail("the AWS emulator is required under CI: set HANGAR_TEST_MOTO_ENDPOINT (tests/run does)")
        pytest.skip("HANGAR_TEST_MOTO_ENDPOINT is not set (run tests/run to start moto)")
    return endpoint


@pytest.fixture
def broker():
    """dev-server with a fresh data directory and a known broker root token: (url, token)."""
    token = "hvs." + secrets.token_urlsafe(18)
    served = _serve(env={"HANGAR_ROOT_SERVICE_TOKEN": token})
    hangar = next(served)
    try:
        yield hangar.url, token
    finally:
        served.close()
