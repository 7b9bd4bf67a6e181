package units

import "testing"

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512MiB", 512 << 20, true},
		{"4GiB", 4 << 30, true},
		{"1g", 1 << 30, true},
		{"1G", 1 << 30, true},
		{"2048 MB", 2048 << 20, true},
		{"1.5GiB", 3 << 29, true},
		{"100", 100, true},
		{"10k", 10 << 10, true},
		{"1t", 1 << 40, true},
		{"", 0, false},
		{"4 potatoes", 0, false},
		{"-1g", 0, false},
		{"0", 0, false},
		{"1.5b", 0, false},
		{"g", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 512: "512 B", 1536: "1.5 KiB", 120 << 20: "120.0 MiB", 20 << 30: "20.0 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 512: "512 B", 1024: "1 KiB", 536870912: "512 MiB", 4 << 30: "4 GiB",
		3 << 29: "1.5 GiB", 2560 << 10: "2.5 MiB", 100000000: "95.4 MiB",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
