//! A module's metadata as the walk reads it from the archive: inputs, outputs, providers, module
//! calls, resources, READMEs of submodules and examples, and what could not be read.

use serde_json::json;

use super::{inspect, module, Tarball};
use crate::archive::{ModuleMetadata, ProviderDependency};

fn metadata(tarball: Tarball) -> ModuleMetadata {
    inspect(&tarball.gz()).expect("accepted").metadata
}

const VARIABLES: &str = r#"
variable "cidr" {
  type        = string
  description = "The VPC's range."
  default     = "10.0.0.0/16"
}

variable "subnets" {
  type = list(object({ name = string, az = optional(string) }))
}

variable "token" {
  type      = string
  sensitive = true
  default   = null
}
"#;

const MAIN: &str = r#"
terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
    random = "~> 3.1"
  }
}

provider "aws" {
  region = var.region
}

provider "tls" {}

module "labels" {
  source  = "cloudposse/label/null"
  version = "0.25.0"
}

resource "aws_vpc" "this" {
  cidr_block = var.cidr
}

data "aws_region" "current" {}

output "vpc_id" {
  description = "The VPC."
  value       = aws_vpc.this.id
}

output "secret" {
  value     = var.token
  sensitive = true
}
"#;

#[test]
fn inputs_outputs_providers_calls_and_resources_are_read() {
    let read = metadata(Tarball::new().file("main.tf", MAIN).file("variables.tf", VARIABLES));
    assert_eq!(read.problem, None);
    let root = &read.root;
    assert!(!root.empty);
    let inputs: Vec<_> = root.inputs.iter().map(|i| (i.name.as_str(), i.kind.as_str(), i.required)).collect();
    assert_eq!(
        inputs,
        [
            ("cidr", "string", false),
            ("subnets", "list(object({ name = string, az = optional(string) }))", true),
            ("token", "string", false),
        ]
    );
    assert_eq!(root.inputs[0].description, "The VPC's range.");
    assert_eq!(root.inputs[0].default, Some(json!("10.0.0.0/16")));
    assert_eq!(root.inputs[2].default, Some(json!(null)), "a null default still makes it optional");
    assert!(root.inputs[2].sensitive);

    let outputs: Vec<_> = root.outputs.iter().map(|o| (o.name.as_str(), o.description.as_str(), o.sensitive)).collect();
    assert_eq!(outputs, [("secret", "", true), ("vpc_id", "The VPC.", false)]);
    let provider = |name: &str, namespace: &str, source: &str, version: &str| ProviderDependency {
        name: name.into(),
        namespace: namespace.into(),
        source: source.into(),
        version: version.into(),
    };
    assert_eq!(
        root.provider_dependencies,
        [
            provider("aws", "hashicorp", "hashicorp/aws", ">= 5.0"),
            provider("random", "hashicorp", "hashicorp/random", "~> 3.1"),
            provider("tls", "hashicorp", "hashicorp/tls", ""),
        ]
    );
    assert_eq!(root.dependencies[0].source, "cloudposse/label/null");
    assert_eq!(root.dependencies[0].version, "0.25.0");
    assert_eq!((root.resources[0].kind.as_str(), root.resources[0].name.as_str()), ("aws_vpc", "this"));
    assert_eq!(root.data_sources[0].kind, "aws_region");
}

#[test]
fn submodules_and_examples_are_read_with_their_readmes() {
    let read = metadata(
        module()
            .file("modules/subnet/main.tf", "variable \"az\" {}\n")
            .file("modules/subnet/README.md", "# Subnet\n")
            .file(
                "examples/basic/main.tf.json",
                r#"{"module": {"vpc": {"source": "../.."}}, "output": {"id": {"value": "x"}}}"#,
            )
            .file("modules/subnet/nested/deeper.tf", "variable \"ignored\" {}\n")
            .file("docs/notes.tf", "variable \"ignored\" {}\n"),
    );
    let paths: Vec<_> = read.submodules.iter().chain(&read.examples).map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["modules/subnet", "examples/basic"]);
    assert_eq!(read.submodules[0].inputs[0].name, "az");
    assert_eq!(read.submodules[0].readme.as_deref(), Some("# Subnet\n"));
    assert_eq!(read.examples[0].dependencies[0].source, "../..");
    assert_eq!(read.examples[0].outputs[0].name, "id");
    assert_eq!(read.root.resources.len(), 1, "the root's own file");
}

#[test]
fn a_file_that_does_not_parse_is_named_and_the_rest_is_still_read() {
    let read = metadata(
        Tarball::new()
            .file("broken.tf", "variable \"x\" {\n  type = \n")
            .file("outputs.tf", "output \"ok\" { value = 1 }\n"),
    );
    let problem = read.problem.expect("a problem");
    assert!(problem.starts_with("root module: broken.tf: "), "{problem}");
    assert_eq!(read.root.outputs[0].name, "ok", "the other file is read");
}

#[test]
fn sources_over_the_budget_are_left_out_and_said_so() {
    let big = format!("# {}\n", "x".repeat(5 * 1024 * 1024));
    let read = metadata(module().file("zz_big.tf", &big));
    let problem = read.problem.expect("a problem");
    assert!(problem.contains("sources over 4 MiB"), "{problem}");
    assert_eq!(read.root.resources.len(), 1, "what fitted is read");
}
