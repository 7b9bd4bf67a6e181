agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
