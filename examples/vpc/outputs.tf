output "subnets" {
  description = "Each zone's subnet range."
  value       = local.subnets
}
