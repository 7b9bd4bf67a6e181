package swarm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// node_timeout: the default when unset, a duration when set, and a bad
// one refused by validate naming the attribute.
func TestNodeTimeoutAttribute(t *testing.T) {
	for _, tc := range []struct {
		set  cty.Value
		want time.Duration
		bad  string
	}{
		{cty.NullVal(cty.String), defaultNodeTimeout, ""},
		{cty.StringVal("45s"), 45 * time.Second, ""},
		{cty.StringVal("soon"), 0, `"soon" is not a duration`},
		{cty.StringVal("10ms"), 0, "under a second"},
	} {
		cfg := runtimeConfig(map[string]cty.Value{attrNodeTimeout: tc.set})
		got, err := parseNodeTimeout(cfg)
		errs := checkRuntime(drivers.ConfigureRequest{Runtime: "fleet", Config: cfg})
		if tc.bad == "" {
			if err != nil || got != tc.want || len(errs) != 0 {
				t.Errorf("%#v: %v, %v, %v", tc.set, got, err, errs)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.bad) {
			t.Errorf("%#v: parse error %v, want %q", tc.set, err, tc.bad)
		}
		if len(errs) != 1 || errs[0].Attribute != attrNodeTimeout {
			t.Errorf("%#v: validate says %v", tc.set, errs)
		}
	}
}

// A bounded call is cancelled once it goes the bound without progress,
// and its error names what stalled and the bound; progress keeps it
// going past the bound.
func TestBoundedStall(t *testing.T) {
	d := &Driver{}
	b := d.bound(t.Context(), "node node2", 200*time.Millisecond)
	defer b.release()
	start := time.Now()
	for time.Since(start) < 500*time.Millisecond {
		b.touch()
		time.Sleep(20 * time.Millisecond)
	}
	if b.ctx.Err() != nil {
		t.Fatalf("a call making progress was cancelled after %v", time.Since(start))
	}
	<-b.ctx.Done()
	if waited := time.Since(start); waited > 500*time.Millisecond+time.Second {
		t.Errorf("the stall was noticed after %v", waited)
	}
	err := b.err(context.Cause(b.ctx))
	if !strings.Contains(err.Error(), "node node2 made no progress for 200ms (node_timeout") {
		t.Errorf("error %q", err)
	}
	if b2 := d.bound(t.Context(), "x", time.Hour); b2.err(errors.New("other")).Error() != "other" {
		t.Error("an error of a call within its bound is reworded")
	}
}
