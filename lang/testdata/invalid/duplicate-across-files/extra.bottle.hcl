variable "x" {
  default = 1
}

agent "coder" { # ERROR: Duplicate agent "coder"
  image = "alpine:4"
}
