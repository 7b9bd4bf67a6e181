package egress

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestCovered reads the cases of testdata/ceiling.txt: for each ceiling,
// the rules it covers and those outside it.
func TestCovered(t *testing.T) {
	f, err := os.Open("testdata/ceiling.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parse := func(line int, s string) Rule {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatalf("ceiling.txt:%d: %v", line, err)
		}
		return r
	}
	var ceiling []Rule
	cases := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "#"):
		case strings.HasPrefix(text, "ceiling:"):
			ceiling = nil
			for _, s := range strings.Split(strings.TrimPrefix(text, "ceiling:"), ",") {
				if s = strings.TrimSpace(s); s != "" {
					ceiling = append(ceiling, parse(line, s))
				}
			}
		default:
			want, rule, ok := strings.Cut(text, " ")
			if !ok || (want != "covered" && want != "outside") {
				t.Fatalf("ceiling.txt:%d: want \"covered RULE\" or \"outside RULE\", got %q", line, text)
			}
			cases++
			r := parse(line, rule)
			if got := Covered(ceiling, r); got != (want == "covered") {
				t.Errorf("ceiling.txt:%d: Covered(%v, %s) = %v, want %s", line, ceiling, r, got, want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cases < 40 {
		t.Fatalf("only %d cases read", cases)
	}
}

func TestUncovered(t *testing.T) {
	ceiling, _ := ParseRules([]string{"*.anthropic.com:443", "github.com:443"})
	allow, _ := ParseRules([]string{"api.anthropic.com:443", "pastebin.com:443", "github.com:443", "github.com:22"})
	got := Uncovered(ceiling, allow)
	if len(got) != 2 || got[0].String() != "pastebin.com:443" || got[1].String() != "github.com:22" {
		t.Fatalf("Uncovered = %v, want [pastebin.com:443 github.com:22]", got)
	}
}
