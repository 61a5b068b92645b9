# A small module for the README's first steps: it needs no provider, so `terraform init` and
# `terraform apply` run anywhere, with nothing to download but the module itself.

locals {
  # Split the network's range into one subnet per zone.
  subnets = { for index, zone in var.zones : zone => cidrsubnet(var.cidr, 8, index) }
}
