# The image is upgraded: the agent boots it with its workspace carried
# over from the snapshot taken first.
agent "coder" {
  image     = "acme/agent:1.5"
  command   = ["sleep", "600"]
  workspace = ["/workspace", "/root/.claude"]

  snapshot_policy {
    before = ["replace"]
  }
}
