agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}

agent "tester" {
  image   = "busybox:1"
  command = ["sleep", "600"]

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 3
  }
}
