agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]

  healthcheck {
    command = ["test", "-f", "/tmp/ready"]
  }
}
