"""A real `terraform init` against a module with a deprecated and a revoked version: the
deprecated one is still installed, the revoked one is neither chosen nor installable."""

import json
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

from test_terraform_init import archive, run_init


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
    configuration = f'module "vpc" {{\n  source  = "{host}/acme/vpc/aws"\n  version = "{constraint}"\n}}\n'
    return run_init(hangar, work, configuration), work


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
