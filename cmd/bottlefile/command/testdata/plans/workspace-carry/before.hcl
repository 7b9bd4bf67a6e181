agent "coder" {
  image     = "acme/agent:1.4"
  command   = ["sleep", "600"]
  workspace = ["/workspace", "/root/.claude"]

  snapshot_policy {
    before = ["replace"]
  }
}
