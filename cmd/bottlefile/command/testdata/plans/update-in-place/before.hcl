agent "coder" {
  image  = "busybox:1"
  cpus   = 1
  memory = "256MiB"
}
