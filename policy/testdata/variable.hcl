egress_ceiling = [var.host]
