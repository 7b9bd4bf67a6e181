resource "x" "y" {}
