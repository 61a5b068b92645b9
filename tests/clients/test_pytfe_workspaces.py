"""Workspaces through pytfe, unchanged: a search, a lock as the CLI's remote backend takes one,
and safe-delete."""

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
