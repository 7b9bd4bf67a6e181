egress_ceiling = [
  "github.com:443",
  "not a rule", # ERROR: Invalid egress policy | testdata/validate-policy/broken-policy/policy.hcl
]
