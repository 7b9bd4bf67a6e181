# The operator's policy every case but broken-policy runs under.
egress_ceiling = [
  "*.anthropic.com:443",
  "github.com:443",
  "10.0.0.0/8:5432",
]
