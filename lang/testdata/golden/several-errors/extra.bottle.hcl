agent "reviewer" {
  runtime = runtime.remote
  imagee  = "alpine:3"
}
