agent "coder" {
  image   = "busybox:1"
  command = ["claud"]
}

agent "reviewer" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
