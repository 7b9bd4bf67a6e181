variable "names" {
  type    = set(string)
  default = ["a", "b", "c"]
}

agent "coder" {
  for_each = var.names
  image    = "busybox:1"
  command  = ["sleep", "600"]
  env      = { NAME = each.key }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 3
  }
}
