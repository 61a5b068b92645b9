"""pytfe's registry provider, version and platform resources against Hangar, unchanged: create,
read, list and delete parse Hangar's answers (pydantic models that refuse a missing or mistyped
field), and the upload links take a release's files (read raw: pytfe keeps no links). pytfe has no GPG key
resource: the key is added over plain HTTP."""

import hashlib

from pytfe import TFEClient, TFEConfig
from pytfe.models import (
    OrganizationCreateOptions,
    RegistryName,
    RegistryProviderCreateOptions,
    RegistryProviderID,
    RegistryProviderPlatformCreateOptions,
    RegistryProviderPlatformID,
    RegistryProviderVersionCreateOptions,
    RegistryProviderVersionID,
)
from test_terraform_providers import Api, gpg, provider_zip  # noqa: F401  (gpg: the fixture)

KEYS_PATH = "/api/registry/private/v2/gpg-keys"


def test_pytfe_publishes_reads_lists_and_deletes_a_provider(hangar, gpg, tmp_path):  # noqa: F811
    client = TFEClient(TFEConfig(address=hangar.url, token=hangar.admin_token))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    api = Api(hangar)
    key_id, fingerprint = gpg.generate("pytfe@acme.example")
    body = {"data": {"type": "gpg-keys", "attributes": {"namespace": "acme", "ascii-armor": gpg.armor(fingerprint)}}}
    assert api.json("POST", KEYS_PATH, body, expect=201)["data"]["attributes"]["key-id"] == key_id

    created = client.registry_providers.create(
        "acme", RegistryProviderCreateOptions(name="widget", namespace="acme", registry_name=RegistryName.PRIVATE)
    )
    assert created.id.startswith("prov-") and created.registry_name.value == "private"
    assert created.permissions.can_delete
    provider = RegistryProviderID(
        organization_name="acme", registry_name=RegistryName.PRIVATE, namespace="acme", name="widget"
    )
    assert client.registry_providers.read(provider).id == created.id
    assert [p.name for p in client.registry_providers.list("acme")] == ["widget"]

    version = client.registry_provider_versions.create(
        provider, RegistryProviderVersionCreateOptions(version="1.0.0", key_id=key_id, protocols=["5.0"])
    )
    assert version.id.startswith("provver-") and version.key_id == key_id and version.protocols == ["5.0"]
    assert version.shasums_uploaded is False and version.permissions.can_upload_asset
    # pytfe keeps no links on a version or platform: they are read raw.
    version_path = "/api/v2/organizations/acme/registry-providers/private/acme/widget/versions/1.0.0"
    links = api.json("GET", version_path)["data"]["links"]

    archive = provider_zip("1.0.0", "#!/bin/sh\n")
    shasum = hashlib.sha256(archive).hexdigest()
    filename = "terraform-provider-widget_1.0.0_linux_amd64.zip"
    version_id = RegistryProviderVersionID(**provider.model_dump(), version="1.0.0")
    platform = client.registry_provider_platforms.create(
        version_id, RegistryProviderPlatformCreateOptions(os="linux", arch="amd64", shasum=shasum, filename=filename)
    )
    assert platform.id.startswith("provpltfrm-") and platform.provider_binary_uploaded is False
    binary_link = api.json("GET", f"{version_path}/platforms/linux/amd64")["data"]["links"]["provider-binary-upload"]

    sums = f"{shasum}  {filename}\n".encode()
    signature = gpg.run("--local-user", fingerprint, "--detach-sign", "--output", "-", str(write(tmp_path, sums)))
    assert api.upload(links["shasums-upload"], sums)[0] == 200
    assert api.upload(links["shasums-sig-upload"], signature)[0] == 200
    assert api.upload(binary_link, archive)[0] == 200

    read = client.registry_provider_versions.read(version_id)
    assert read.shasums_uploaded and read.shasums_sig_uploaded
    assert "shasums-download" in api.json("GET", version_path)["data"]["links"]
    assert [v.version for v in client.registry_provider_versions.list(provider)] == ["1.0.0"]
    platform_id = RegistryProviderPlatformID(**version_id.model_dump(), os="linux", arch="amd64")
    assert client.registry_provider_platforms.read(platform_id).provider_binary_uploaded
    assert [p.os for p in client.registry_provider_platforms.list(version_id)] == ["linux"]

    client.registry_provider_platforms.delete(platform_id)
    client.registry_provider_versions.delete(version_id)
    client.registry_providers.delete(provider)
    assert list(client.registry_providers.list("acme")) == []


def write(folder, data: bytes):
    path = folder / "SHA256SUMS"
    path.write_bytes(data)
    return path
