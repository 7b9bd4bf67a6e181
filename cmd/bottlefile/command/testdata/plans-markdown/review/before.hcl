variable "github_token" {
  type      = string
  sensitive = true
  default   = "s3cr3t-old"
}

runtime "default" {
  driver         = "docker"
  egress_ceiling = ["api.anthropic.com:443", "api.github.com:443"]
}

agent "coder" {
  image   = "busybox:1"
  command = ["sh", "-c", "sleep 600 | cat"]

  egress {
    allow = ["api.anthropic.com:443", "api.github.com:443"]

    credential "github" {
      host   = "api.github.com"
      header = "authorization"
      prefix = "Bearer "
      value  = var.github_token
    }
  }
}

agent "tester" {
  image   = "busybox:1"
  command = ["sleep", "600"]

  snapshot_policy {
    before    = ["replace"]
    keep_last = 3
  }
}
