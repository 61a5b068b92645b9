variable "cidr" {
  type        = string
  description = "The network's address range."
  default     = "10.0.0.0/16"
}

variable "zones" {
  type        = list(string)
  description = "The zones to put a subnet in."
  default     = ["a", "b"]
}
