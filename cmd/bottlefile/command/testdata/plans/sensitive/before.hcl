variable "token" {
  type      = string
  sensitive = true
  default   = "s3cr3t-old"
}

agent "coder" {
  image = "busybox:1"
  env   = { ROLE = "coder", TOKEN = var.token }
}
