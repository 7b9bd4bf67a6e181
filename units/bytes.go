package units

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var sizeRe = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$`)

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseBytes parses a size: a number of bytes, or a number with a unit:
// b, k, m, g, t, optionally followed by "b" or "ib", in any case. As with
// docker's --memory, every unit is binary: 1k and 1KB are 1024 bytes.
func ParseBytes(s string) (int64, error) {
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	mult, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown unit %q", s, m[2])
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	n := f * mult
	if n != math.Trunc(n) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	if n < 1 || n > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return int64(n), nil
}

// FormatBytes writes a size in binary units: "512 B", "1.5 KiB", "20.0 GiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// FormatSize writes a configured size as people write it: "512 MiB" for a
// whole number of a unit, "1.5 GiB" for a half, and else FormatBytes.
// Plans show memory and disk sizes with it.
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return FormatBytes(n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	if n%div == 0 {
		return fmt.Sprintf("%d %ciB", n/div, "KMGTPE"[exp])
	}
	if (2*n)%div == 0 {
		return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
	}
	return FormatBytes(n)
}
