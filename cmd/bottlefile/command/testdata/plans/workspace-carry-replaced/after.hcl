# The image is upgraded and no snapshot_policy takes a snapshot: the
# workspace is carried over from the container being replaced.
agent "coder" {
  image     = "acme/agent:1.5"
  command   = ["sleep", "600"]
  workspace = ["/workspace"]
}
