egress_ceiling = []
