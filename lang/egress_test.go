package lang

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/bottlefile/bottlefile/egress"
)

// TestEgressRulesAgree: validate accepts exactly the rules the drivers'
// parser accepts (they once disagreed: 256.1.1.1:443 passed validate and
// failed at plan; 10.0.0.0/8:443 never passed validate), and its error
// points at the rule.
func TestEgressRulesAgree(t *testing.T) {
	f, err := os.Open("testdata/egress-rules.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		rule := sc.Text()
		if strings.HasPrefix(rule, "# ") {
			continue
		}
		n++
		t.Run(rule, func(t *testing.T) {
			src := fmt.Sprintf("agent \"a\" {\n  image = \"alpine:3\"\n  egress {\n    allow = [\n      \"ok.example.com\",\n      %q,\n    ]\n  }\n}\n", rule)
			_, diags := NewParserFS(fstest.MapFS{"proj/Bottlefile": {Data: []byte(src)}}).LoadDir("proj")
			_, parseErr := egress.ParseRule(rule)
			if diags.HasErrors() != (parseErr != nil) {
				t.Fatalf("validate: %v; egress.ParseRule: %v", diags, parseErr)
			}
			if diags.HasErrors() {
				if d := diags[0]; d.Subject == nil || d.Subject.Start.Line != 6 {
					t.Errorf("the diagnostic does not point at the rule on line 6: %v", d)
				}
			}
		})
	}
	if n < 41 {
		t.Errorf("%d rules; the table covers at least 41 kinds", n)
	}
}
