// Package units owns sizes in bytes: parsing "512MiB" the way docker does
// and writing "1.5 KiB" for people. It is a leaf, so every package,
// drivers included, may import it.
package units
