"""The Terraform CLI (1.0.3, the venv's) keeps its state in Hangar through `backend "remote"`,
unchanged: two applies advance the serial, `terraform state pull` shows the second, another
configuration reads the output through `terraform_remote_state`, and an apply against a
workspace someone else locked fails with Terraform's lock error."""

import json
import os
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from pytfe import TFEClient, TFEConfig
from pytfe.models import OrganizationCreateOptions, WorkspaceCreateOptions, WorkspaceLockOptions

from test_terraform_init import terraform


def backend(host: str) -> str:
    return f"""
terraform {{
  backend "remote" {{
    hostname     = "{host}"
    organization = "acme"
    workspaces {{
      name = "network"
    }}
  }}
}}
"""


NETWORK = """
variable "greeting" {
  type = string
}

output "greeting" {
  value = var.greeting
}
"""


def reader(host: str) -> str:
    return f"""
data "terraform_remote_state" "network" {{
  backend = "remote"
  config = {{
    hostname     = "{host}"
    organization = "acme"
    workspaces = {{
      name = "network"
    }}
  }}
}}

output "copied" {{
  value = data.terraform_remote_state.network.outputs.greeting
}}
"""


class Cli:
    """`terraform` in one working directory, with a token for Hangar's host."""

    def __init__(self, hangar, work: Path, configuration: str, token: str):
        self.work = work
        work.mkdir()
        (work / "main.tf").write_text(configuration)
        host = urlparse(hangar.url).netloc
        cli_config = work / "terraformrc"
        cli_config.write_text(f'credentials "{host}" {{\n  token = "{token}"\n}}\n')
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "TF_CLI_CONFIG_FILE": str(cli_config),
            "SSL_CERT_FILE": hangar.certificate,
            "TF_IN_AUTOMATION": "1",
            "CHECKPOINT_DISABLE": "1",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess:
        command = [terraform(), *args]
        return subprocess.run(command, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=180)

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, f"terraform {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result.stdout


def test_terraform_keeps_its_state_in_a_hangar_workspace(hangar_tls, tmp_path: Path):
    host = urlparse(hangar_tls.url).netloc
    admin = TFEClient(TFEConfig(address=hangar_tls.url, token=hangar_tls.admin_token, ca_bundle=hangar_tls.certificate))
    admin.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    workspace = admin.workspaces.create("acme", WorkspaceCreateOptions(name="network", execution_mode="local"))

    network = Cli(hangar_tls, tmp_path / "network", backend(host) + NETWORK, hangar_tls.admin_token)
    network.ok("init", "-input=false", "-no-color")
    network.ok("apply", "-auto-approve", "-input=false", "-no-color", "-var", "greeting=one")
    first = json.loads(network.ok("state", "pull"))
    network.ok("apply", "-auto-approve", "-input=false", "-no-color", "-var", "greeting=two")
    second = json.loads(network.ok("state", "pull"))
    assert second["serial"] > first["serial"], (first["serial"], second["serial"])
    assert second["lineage"] == first["lineage"]
    assert second["outputs"]["greeting"]["value"] == "two"
    current = admin.state_versions.read_current(workspace.id)
    assert current.serial == second["serial"]
    downloaded = json.loads(admin.state_versions.download_current(workspace.id))
    assert (downloaded["serial"], downloaded["outputs"]["greeting"]["value"]) == (second["serial"], "two")

    copy = Cli(hangar_tls, tmp_path / "reader", reader(host), hangar_tls.admin_token)
    copy.ok("init", "-input=false", "-no-color")
    copy.ok("apply", "-auto-approve", "-input=false", "-no-color")
    assert copy.ok("output", "-raw", "copied") == "two"

    # Someone else holds the lock: the apply stops with Terraform's lock error, state untouched.
    admin.workspaces.lock(workspace.id, WorkspaceLockOptions(reason="maintenance"))
    blocked = Cli(hangar_tls, tmp_path / "blocked", backend(host) + NETWORK, other_token(hangar_tls))
    blocked.ok("init", "-input=false", "-no-color")
    refused = blocked.run("apply", "-auto-approve", "-input=false", "-no-color", "-var", "greeting=three")
    assert refused.returncode != 0
    assert "Error acquiring the state lock" in refused.stderr, refused.stdout + refused.stderr
    assert json.loads(network.ok("state", "pull"))["outputs"]["greeting"]["value"] == "two"


def other_token(hangar) -> str:
    """A token of the owners team of `acme`: another user than the site admin holding the lock."""
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=hangar.certificate)

    def call(method: str, path: str) -> dict:
        request = urllib.request.Request(f"{hangar.url}{path}", method=method)
        request.add_header("Authorization", f"Bearer {hangar.admin_token}")
        request.add_header("Content-Type", "application/vnd.api+json")
        with urllib.request.urlopen(request, context=context) as response:
            return json.loads(response.read() or b"null")

    teams = call("GET", "/api/v2/organizations/acme/teams")["data"]
    owners = next(team for team in teams if team["attributes"]["name"] == "owners")
    return call("POST", f"/api/v2/teams/{owners['id']}/authentication-token")["data"]["attributes"]["token"]
