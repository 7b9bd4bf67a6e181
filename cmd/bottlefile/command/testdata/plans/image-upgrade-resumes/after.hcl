# The image is upgraded, but the agent declares no workspace: it resumes
# from the snapshot taken first, and the plan says the new image is not used.
agent "coder" {
  image   = "acme/agent:1.5"
  command = ["sleep", "600"]

  snapshot_policy {
    before = ["replace"]
  }
}
