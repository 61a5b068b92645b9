//! What a module's Terraform files declare, parsed at ingest and served as the public registry
//! serves it: the protocol's module detail (`root`, `submodules`, `examples`, `providers`) and the
//! management API's version (`metadata`). A module that does not parse is still a version.

use hangar_tests::builders::{acme, new_module, publish_version};
use hangar_tests::{targz, Entry, TestApp};
use serde_json::{json, Value};

const V1: &str = "/api/registry/v1/modules";
const PROVIDER: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";

const MAIN: &[u8] = br#"
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.0" }
  }
}

variable "cidr" {
  type        = string
  description = "The VPC's range."
  default     = "10.0.0.0/16"
}

variable "name" {
  type = string
}

resource "aws_vpc" "this" {
  cidr_block = var.cidr
}

module "subnets" {
  source = "./modules/subnets"
}

output "vpc_id" {
  description = "The VPC."
  value       = aws_vpc.this.id
}
"#;

/// `acme`'s module vpc/aws with version 1.0.0 made of `entries`; returns (app, owners token).
async fn module_of(entries: &[Entry<'_>]) -> (TestApp, String) {
    let (app, owners) = acme().await;
    new_module(&app, &owners, "acme", "vpc", "aws").await;
    let settled = publish_version(&app, &owners, PROVIDER, "1.0.0", targz(entries)).await;
    assert_eq!(settled.body["data"]["attributes"]["status"], "ok", "{:?}", settled.body);
    (app, owners)
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().expect("a list").iter().map(|item| item["name"].as_str().expect("a name")).collect()
}

#[tokio::test]
async fn the_module_detail_shows_what_the_terraform_files_declare() {
    let (app, owners) = module_of(&[
        Entry::File("main.tf", MAIN),
        Entry::File("README.md", b"# vpc\nA network.\n"),
        Entry::File("modules/subnets/main.tf", b"variable \"azs\" { type = list(string) }\n"),
        Entry::File("modules/subnets/README.md", b"# subnets\n"),
        Entry::File("examples/basic/main.tf", b"module \"vpc\" {\n  source = \"../..\"\n  name = \"x\"\n}\n"),
    ])
    .await;
    for path in [format!("{V1}/acme/vpc/aws/1.0.0"), format!("{V1}/acme/vpc/aws")] {
        let detail = app.get(&path, &owners).await;
        assert_eq!(detail.status, 200, "{path}: {:?}", detail.body);
        let root = &detail.body["root"];
        assert_eq!(root["path"], "");
        assert_eq!(root["readme"], "# vpc\nA network.\n");
        assert_eq!(root["empty"], false);
        assert_eq!(names(&root["inputs"]), ["cidr", "name"], "{path}");
        let cidr = &root["inputs"][0];
        assert_eq!(cidr["type"], "string");
        assert_eq!(cidr["description"], "The VPC's range.");
        assert_eq!(cidr["default"], "\"10.0.0.0/16\"", "JSON text, as the public registry writes it");
        assert_eq!(cidr["required"], false);
        assert_eq!(root["inputs"][1]["required"], true);
        assert_eq!(names(&root["outputs"]), ["vpc_id"]);
        assert_eq!(root["resources"], json!([{"name": "this", "type": "aws_vpc"}]));
        assert_eq!(root["dependencies"][0]["source"], "./modules/subnets");
        assert_eq!(
            root["provider_dependencies"],
            json!([{"name": "aws", "namespace": "hashicorp", "source": "hashicorp/aws", "version": ">= 5.0"}])
        );
        assert_eq!(detail.body["providers"], json!(["aws"]));
        let submodule = &detail.body["submodules"][0];
        assert_eq!(
            (submodule["path"].as_str(), submodule["name"].as_str()),
            (Some("modules/subnets"), Some("subnets"))
        );
        assert_eq!(submodule["readme"], "# subnets\n");
        assert_eq!(submodule["inputs"][0]["type"], "list(string)");
        assert_eq!(detail.body["examples"][0]["path"], "examples/basic");
        assert_eq!(detail.body["examples"][0]["dependencies"][0]["source"], "../..");
    }

    let version = app.get(&format!("{PROVIDER}/version?module_version=1.0.0"), &owners).await;
    let metadata = &version.body["data"]["attributes"]["metadata"];
    assert_eq!(names(&metadata["root"]["inputs"]), ["cidr", "name"], "{:?}", version.body);
    assert_eq!(metadata["submodules"][0]["path"], "modules/subnets");
}

#[tokio::test]
async fn a_module_that_does_not_parse_is_a_version_whose_metadata_says_why() {
    let (app, owners) = module_of(&[
        Entry::File("main.tf", b"variable \"x\" {\n  type = \n"),
        Entry::File("outputs.tf", b"output \"id\" { value = 1 }\n"),
    ])
    .await;
    let detail = app.get(&format!("{V1}/acme/vpc/aws/1.0.0"), &owners).await;
    assert_eq!(detail.status, 200, "{:?}", detail.body);
    let problem = detail.body["metadata_problem"].as_str().expect("why it could not be read");
    assert!(problem.starts_with("root module: main.tf: "), "{problem}");
    assert_eq!(names(&detail.body["root"]["outputs"]), ["id"], "the readable file is still read");
    let download = app.get(&format!("{V1}/acme/vpc/aws/1.0.0/download"), &owners).await;
    assert_eq!(download.status, 204, "still installable: {:?}", download.body);
}

#[tokio::test]
async fn deleting_a_version_deletes_its_metadata() {
    let (app, owners) = module_of(&[Entry::File("main.tf", MAIN)]).await;
    let store = app.store();
    let org = hangar::store::ItemStore::get(&store, &hangar::store::keys::organization_name("acme")).await;
    let org = org.expect("a read").expect("acme");
    let org_id = org.attrs().unwrap()["org_id"].as_str().expect("an id").to_owned();
    let key = hangar::store::keys::module_version_metadata(&org_id, "vpc", "aws", "1.0.0");
    assert!(hangar::store::ItemStore::get(&store, &key).await.expect("a read").is_some(), "stored at ingest");
    assert_eq!(app.delete(&format!("{PROVIDER}/1.0.0"), &owners).await.status, 204);
    assert!(hangar::store::ItemStore::get(&store, &key).await.expect("a read").is_none(), "deleted with the version");
}

/// A default nested as deep as JSON's parser goes (124 levels) passed ingest and left a record
/// no read could parse: every read, the delete of the version and of its organization answered
/// 500. The default is now dropped at ingest, with a note, so the record reads back and deletes.
#[tokio::test]
async fn a_default_nested_past_the_bound_is_dropped_and_the_version_reads_and_deletes() {
    let deep = format!("{}1{}", "[".repeat(124), "]".repeat(124));
    let large = format!("\"{}\"", "x".repeat(20_000));
    let variables = format!(
        r#"{{"variable": {{"deep": {{"default": {deep}}}, "large": {{"default": {large}}}, "fine": {{"default": [[1]]}}}}}}"#
    );
    let (app, owners) = module_of(&[Entry::File("./main.tf.json", variables.as_bytes())]).await;
    let read = app.get(&format!("{PROVIDER}/version?module_version=1.0.0"), &owners).await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    let detail = app.get(&format!("{V1}/acme/vpc/aws/1.0.0"), &owners).await;
    assert_eq!(detail.status, 200, "{:?}", detail.body);
    let inputs = &detail.body["root"]["inputs"];
    let default_of = |name: &str| {
        let input = inputs.as_array().expect("inputs").iter().find(|i| i["name"] == name).expect("the input");
        input["default"].clone()
    };
    assert_eq!(default_of("fine"), json!("[[1]]"), "a default within the bounds is kept: {inputs}");
    for name in ["deep", "large"] {
        let default = default_of(name).to_string();
        assert!(default.contains("not kept"), "{name}: {default}");
    }
    let problem = read.body.to_string();
    assert!(problem.contains("variable deep") && problem.contains("16 levels"), "{problem}");
    assert_eq!(app.get(&format!("{V1}/acme/vpc/aws/versions"), &owners).await.status, 200);
    let page = app.client.get(format!("{}/app/organizations/acme/registry/modules/vpc/aws", app.url)).send().await;
    assert_ne!(page.expect("the console answers").status().as_u16(), 500);

    let deleted = app.delete(&format!("{PROVIDER}/1.0.0"), &owners).await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let organization = app.delete("/api/v2/organizations/acme", &app.admin_token).await;
    assert_eq!(organization.status, 204, "{:?}", organization.body);
}
