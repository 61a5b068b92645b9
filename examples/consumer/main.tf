# Uses the module the README publishes to a local Hangar (dev-server --tls on 127.0.0.1:8443).
module "vpc" {
  source  = "127.0.0.1:8443/acme/vpc/aws"
  version = "~> 1.0"
  zones   = ["a", "b", "c"]
}

output "subnets" {
  value = module.vpc.subnets
}
