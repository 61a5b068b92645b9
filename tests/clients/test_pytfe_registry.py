"""The registry management API through pytfe, unchanged: the calls a module author makes."""

import io
import tarfile

import pytest
from pytfe import TFEClient, TFEConfig
from pytfe.errors import NotFound, TFEError
from pytfe.models import (
    OrganizationCreateOptions,
    RegistryModuleCreateOptions,
    RegistryModuleCreateVersionOptions,
    RegistryModuleID,
    RegistryName,
)


def module_archive() -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, body in [("main.tf", b'variable "cidr" {}\n'), ("README.md", b"# vpc\n")]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    buffer.seek(0)
    return buffer


def test_a_module_author_publishes_reads_and_deletes_through_pytfe(hangar, settled):
    client = TFEClient(TFEConfig(address=hangar.url, token=hangar.admin_token))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))

    created = client.registry_modules.create(
        "acme", RegistryModuleCreateOptions(name="vpc", provider="aws", registry_name=RegistryName.PRIVATE)
    )
    assert created.id.startswith("mod-")
    assert created.namespace == "acme"
    assert created.status == "pending"
    assert created.version_statuses == []

    vpc = RegistryModuleID(organization="acme", name="vpc", provider="aws")
    version = client.registry_modules.create_version(vpc, RegistryModuleCreateVersionOptions(version="1.0.0"))
    assert version.status == "pending"
    assert version.source == "tfe-api"
    client.registry_modules.upload_tar_gzip(version.links["upload"], module_archive())
    second = client.registry_modules.create_version(vpc, RegistryModuleCreateVersionOptions(version="1.1.0"))
    client.registry_modules.upload_tar_gzip(second.links["upload"], module_archive())
    assert settled(client, vpc, "1.0.0") == "ok"
    assert settled(client, vpc, "1.1.0") == "ok"

    read = client.registry_modules.read(vpc)
    assert read.id == created.id
    assert read.status == "setup_complete"
    assert sorted((s.version, s.status) for s in read.version_statuses) == [("1.0.0", "ok"), ("1.1.0", "ok")]
    assert client.registry_modules.read(RegistryModuleID(id=created.id)).name == "vpc"
    assert client.registry_modules.read_version(vpc, "1.0.0").status == "ok"

    listed = list(client.registry_modules.list("acme"))
    assert [m.id for m in listed] == [created.id]

    client.registry_modules.delete_version(vpc, "1.0.0")
    assert [s.version for s in client.registry_modules.read(vpc).version_statuses] == ["1.1.0"]
    client.registry_modules.delete_provider(vpc)
    with pytest.raises((NotFound, TFEError)):
        client.registry_modules.read(vpc)

    client.registry_modules.create("acme", RegistryModuleCreateOptions(name="vpc", provider="google"))
    client.registry_modules.delete_by_name(RegistryModuleID(organization="acme", name="vpc", provider="google"))
    assert list(client.registry_modules.list("acme")) == []


def test_pytfe_curates_a_public_module(hangar):
    client = TFEClient(TFEConfig(address=hangar.url, token=hangar.admin_token))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    public = client.registry_modules.create(
        "acme",
        RegistryModuleCreateOptions(
            name="consul", provider="aws", namespace="hashicorp", registry_name=RegistryName.PUBLIC
        ),
    )
    assert public.registry_name == RegistryName.PUBLIC
    assert public.namespace == "hashicorp"
