variable "token" {
  type      = string
  sensitive = true
  default   = "s3cr3t-new"
}

agent "coder" {
  image = "busybox:1"
  env   = { ROLE = "coder", TOKEN = var.token }
}
