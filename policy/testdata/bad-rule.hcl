egress_ceiling = [
  "api.anthropic.com:443",
  "https://github.com/",
]
