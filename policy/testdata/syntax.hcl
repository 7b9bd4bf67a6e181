egress_ceiling = [
  "api.anthropic.com:443"
  "github.com:443",
]
