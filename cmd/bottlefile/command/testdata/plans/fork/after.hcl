agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  env     = { ROLE = "coder" }
}

snapshot "reviewed" {
  agent       = agent.coder
  description = "ready for review"
}

# A fork: no image of its own, only its own env.
agent "reviewer" {
  from_snapshot = snapshot.reviewed
  command       = ["sleep", "600"]
  env           = { ROLE = "reviewer" }
}

# Reads the snapshot's image: created after it is taken.
agent "follower" {
  image   = snapshot.reviewed.image
  command = ["sleep", "600"]
  env     = { CODER = agent.coder.id }
}
