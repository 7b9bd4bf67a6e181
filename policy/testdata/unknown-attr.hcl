egress_ceiling = ["api.anthropic.com:443"]
egress_allow   = ["github.com:443"]
