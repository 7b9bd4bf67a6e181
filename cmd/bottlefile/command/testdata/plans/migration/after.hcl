runtime "here" {
  driver = "docker"
}

runtime "there" {
  driver = "smolvm"
}

agent "coder" {
  runtime = runtime.there
  image   = "busybox:1"
  command = ["sleep", "600"]
}
