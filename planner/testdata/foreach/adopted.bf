agent "coder" {
  for_each = toset(["a", "b"])
  image    = "busybox:1"
  command  = ["sleep", "600"]
}

moved {
  from = agent.coder
  to   = agent.coder["a"]
}
