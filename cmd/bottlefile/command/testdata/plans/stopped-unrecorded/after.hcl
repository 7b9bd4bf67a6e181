agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  env     = { ROLE = "coder" }
}
