agent "coder" {
  image   = "acme/agent:1.4"
  command = ["sleep", "600"]

  snapshot_policy {
    before = ["replace"]
  }
}
