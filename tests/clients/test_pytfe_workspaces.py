"""Workspaces through pytfe, unchanged: a search, a lock as the CLI's remote backend takes one,
safe-delete, variables, and state versions."""

import pytest
from pytfe import TFEClient, TFEConfig
from pytfe.errors import TFEError
from pytfe.models import (
    OrganizationCreateOptions,
    WorkspaceCreateOptions,
    WorkspaceListOptions,
    WorkspaceLockOptions,
)


def test_an_operator_locks_searches_and_safely_deletes_workspaces_through_pytfe(hangar):
    client = TFEClient(TFEConfig(address=hangar.url, token=hangar.admin_token))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))

    prod = client.workspaces.create("acme", WorkspaceCreateOptions(name="prod-network"))
    client.workspaces.create("acme", WorkspaceCreateOptions(name="staging-network"))
    found = list(client.workspaces.list("acme", WorkspaceListOptions(search="prod")))
    assert [w.name for w in found] == ["prod-network"]

    locked = client.workspaces.lock(prod.id, WorkspaceLockOptions(reason="maintenance"))
    assert locked.locked is True
    with pytest.raises(TFEError):
        client.workspaces.lock(prod.id, WorkspaceLockOptions(reason="again"))
    with pytest.raises(TFEError, match="locked"):
        client.workspaces.safe_delete_by_id(prod.id)
    assert client.workspaces.unlock(prod.id).locked is False

    client.workspaces.safe_delete_by_id(prod.id)
    assert [w.name for w in client.workspaces.list("acme")] == ["staging-network"]


def test_variables_and_state_through_pytfe(hangar):
    import base64
    import hashlib
    import json

    from pytfe.models import CategoryType, VariableCreateOptions, VariableUpdateOptions

    client = TFEClient(TFEConfig(address=hangar.url, token=hangar.admin_token))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    workspace = client.workspaces.create("acme", WorkspaceCreateOptions(name="network"))

    region = client.variables.create(
        workspace.id, VariableCreateOptions(key="region", value="eu-west-1", category=CategoryType.TERRAFORM)
    )
    secret = client.variables.create(
        workspace.id, VariableCreateOptions(key="TOKEN", value="s3cret", category=CategoryType.ENV, sensitive=True)
    )
    assert secret.sensitive and not secret.value
    listed = {v.key: v for v in client.variables.list(workspace.id)}
    assert listed["region"].value == "eu-west-1" and not listed["TOKEN"].value
    updated = client.variables.update(workspace.id, region.id, VariableUpdateOptions(value="us-east-1"))
    assert updated.value == "us-east-1"
    client.variables.delete(workspace.id, secret.id)
    assert [v.key for v in client.variables.list(workspace.id)] == ["region"]

    # State written as the CLI writes it, read back through pytfe's state-version calls.
    client.workspaces.lock(workspace.id, WorkspaceLockOptions(reason="write state"))
    state = json.dumps({"version": 4, "terraform_version": "1.0.3", "serial": 1, "lineage": "lin",
                        "outputs": {"x": {"value": "y", "type": "string"}}, "resources": []}).encode()
    from pytfe.models import StateVersionCreateOptions

    created = client.state_versions.create(workspace.id, StateVersionCreateOptions(
        serial=1, md5=hashlib.md5(state).hexdigest(), state=base64.b64encode(state).decode()))
    assert created.serial == 1
    assert client.state_versions.read_current(workspace.id).id == created.id
    assert json.loads(client.state_versions.download_current(workspace.id))["outputs"]["x"]["value"] == "y"
    outputs = list(client.state_versions.list_outputs(created.id))
    assert [(o.name, o.value) for o in outputs] == [("x", "y")]

    # A larger state goes the way Terraform 1.6 and later send every state: a version made
    # without it, the state PUT on its upload link, the version read again until it is current.
    import time

    second = json.dumps({"version": 4, "terraform_version": "1.6.0", "serial": 2, "lineage": "lin",
                         "outputs": {"x": {"value": "z" * 100_000, "type": "string"}}, "resources": []}).encode()
    uploaded = client.state_versions.upload(
        workspace.id, raw_state=second, raw_json_state=b'{"format_version": "1.0"}',
        options=StateVersionCreateOptions(serial=2, md5=hashlib.md5(second).hexdigest(), lineage="lin"))
    for _ in range(100):
        if client.state_versions.read(uploaded.id).status == "finalized":
            break
        time.sleep(0.05)
    assert client.state_versions.read_current(workspace.id).id == uploaded.id
    assert client.state_versions.download_current(workspace.id) == second
