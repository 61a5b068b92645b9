"""A real `terraform init` against a module with a deprecated and a revoked version: the
deprecated one is still installed, the revoked one is neither chosen nor installable."""

import json
import os
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import requests
from pytfe import TFEClient, TFEConfig
from pytfe.models import (
    OrganizationCreateOptions,
    RegistryModuleCreateOptions,
    RegistryModuleCreateVersionOptions,
    RegistryModuleID,
)

from test_terraform_init import archive, terraform


def change(hangar, version: str, attributes: dict) -> None:
    reply = requests.patch(
        f"{hangar.url}/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws/{version}",
        headers={"Authorization": f"Bearer {hangar.admin_token}", "Content-Type": "application/vnd.api+json"},
        json={"data": {"type": "module-versions", "attributes": attributes}},
        verify=hangar.certificate,
        timeout=30,
    )
    assert reply.status_code == 200, reply.text


def init(hangar, tmp_path: Path, name: str, constraint: str) -> tuple[subprocess.CompletedProcess, Path]:
    host = urlparse(hangar.url).netloc
    work = tmp_path / name
    work.mkdir()
    (work / "main.tf").write_text(f'module "vpc" {{\n  source  = "{host}/acme/vpc/aws"\n  version = "{constraint}"\n}}\n')
    cli_config = tmp_path / "terraformrc"
    cli_config.write_text(f'credentials "{host}" {{\n  token = "{hangar.admin_token}"\n}}\n')
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "SSL_CERT_FILE": hangar.certificate,
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
    }
    command = [terraform(), "init", "-input=false", "-no-color"]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120), work


def test_terraform_init_installs_a_deprecated_version_and_never_a_revoked_one(hangar_tls, settled, tmp_path: Path):
    client = TFEClient(TFEConfig(address=hangar_tls.url, token=hangar_tls.admin_token, ca_bundle=hangar_tls.certificate))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    client.registry_modules.create("acme", RegistryModuleCreateOptions(name="vpc", provider="aws"))
    vpc = RegistryModuleID(organization="acme", name="vpc", provider="aws")
    for version in ["1.0.0", "1.1.0", "1.2.0"]:
        created = client.registry_modules.create_version(vpc, RegistryModuleCreateVersionOptions(version=version))
        client.registry_modules.upload_tar_gzip(created.links["upload"], archive(version))
        assert settled(client, vpc, version) == "ok"
    deprecated = {"deprecated-status": "Deprecated", "reason": "Use 2.x.", "link": "https://example.com/upgrade"}
    change(hangar_tls, "1.1.0", {"deprecation": deprecated})
    change(hangar_tls, "1.2.0", {"deprecation": deprecated})
    change(hangar_tls, "1.2.0", {"revocation": {"status": "Revoked", "message": "Leaks credentials."}})

    result, work = init(hangar_tls, tmp_path, "range", "~> 1.0")
    assert result.returncode == 0, result.stdout + result.stderr
    modules = json.loads((work / ".terraform" / "modules" / "modules.json").read_text())["Modules"]
    vpc_module = next(m for m in modules if m["Key"] == "vpc")
    assert vpc_module["Version"] == "1.1.0", "the deprecated 1.1.0 is still installed; the revoked 1.2.0 is not offered"
    assert 'value = "1.1.0"' in (work / vpc_module["Dir"] / "main.tf").read_text()

    pinned, _ = init(hangar_tls, tmp_path, "pinned", "1.2.0")
    assert pinned.returncode != 0, "a revoked version cannot be installed, even pinned"
    assert "no available version" in pinned.stdout + pinned.stderr, pinned.stdout + pinned.stderr
