// Package drivers is the boundary between bottlefile's core and the runtimes
// it drives. It holds interfaces and plain data only: the core evaluates the
// configuration ahead of time and hands drivers cty values, so no driver ever
// sees HCL, and the core never imports a concrete driver.
package drivers
