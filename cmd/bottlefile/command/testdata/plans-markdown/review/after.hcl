# The token is rotated, the coder may now reach github.com and the ceiling
# lets it, its image changes (a replace that discards what it wrote), and
# the tester's block is removed (its work and snapshots are deleted).
variable "github_token" {
  type      = string
  sensitive = true
  default   = "s3cr3t-new"
}

runtime "default" {
  driver         = "docker"
  egress_ceiling = ["api.anthropic.com:443", "api.github.com:443", "github.com:443"]
}

agent "coder" {
  image   = "busybox:1.36"
  command = ["sh", "-c", "sleep 600 | cat"]

  egress {
    allow = ["api.anthropic.com:443", "api.github.com:443", "github.com:443"]

    credential "github" {
      host   = "api.github.com"
      header = "authorization"
      prefix = "Bearer "
      value  = var.github_token
    }
  }
}
