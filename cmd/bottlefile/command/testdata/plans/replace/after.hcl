agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "700"]
  env     = { ROLE = "coder" }
}
