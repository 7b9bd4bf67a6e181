# Only the image changes: the replace discards what the agent wrote, and
# no egress or credential changes.
agent "coder" {
  image   = "busybox:1.36"
  command = ["sleep", "600"]
}
