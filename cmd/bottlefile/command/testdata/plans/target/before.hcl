agent "coder" {
  image   = "busybox:2"
  command = ["sleep", "600"]
  env     = { ROLE = "coder" }
}
