# The api's sidecar lives here so that the api block above stays short;
# sidecars cannot be split from their agent, so this file only adds an output.
output "seed" {
  value = snapshot.api-seed.image
}
