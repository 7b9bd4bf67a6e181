runtime "here" {
  driver = "docker"
}

runtime "there" {
  driver = "smolvm"
}

agent "coder" {
  runtime = runtime.here
  image   = "busybox:1"
  command = ["sleep", "600"]
}
