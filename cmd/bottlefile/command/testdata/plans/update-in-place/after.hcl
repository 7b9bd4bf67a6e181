agent "coder" {
  image  = "busybox:1"
  cpus   = 2
  memory = "512MiB"
}
