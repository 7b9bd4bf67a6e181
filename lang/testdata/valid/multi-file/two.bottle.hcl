agent "two" {
  image      = var.image
  depends_on = [agent.one]
}
