# The operator's ceiling.
egress_ceiling = [
  "api.anthropic.com:443",
  "*.github.com:443",
  "10.0.0.0/8:5432",
  "api.anthropic.com:443", # a repeat is dropped
]
