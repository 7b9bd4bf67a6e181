package nodesnap

import "runtime"

// goarch is the architecture images pushed from here are for: this
// machine's, as the gateway binary built with it.
func goarch() string { return runtime.GOARCH }
