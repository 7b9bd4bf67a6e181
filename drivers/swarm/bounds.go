package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// A node's engine and the registry are reached over networks that can
// partition: a connection then hangs until the kernel gives up on it
// (minutes). Every call to a node's engine and to the registry is
// bounded by the runtime block's node_timeout:
//
//	node_timeout = "30s" # the default
//
// A call that streams its progress (a push, a pull) may run longer, as
// long as it never goes node_timeout without progress; a commit, which
// reports none, gets commitBounds times as long. A call that runs out
// fails naming the node or the registry and the bound.

// attrNodeTimeout is the runtime block's bound on node and registry
// calls.
const attrNodeTimeout = "node_timeout"

// defaultNodeTimeout is node_timeout when the block sets none: longer
// than a healthy node or registry ever pauses, far shorter than the
// kernel's TCP timeout.
const defaultNodeTimeout = 30 * time.Second

// commitBounds is how many node_timeouts a commit may take: it reports
// no progress, and writes what the agent wrote.
const commitBounds = 4

// parseNodeTimeout reads node_timeout from a runtime block: the default
// when null or unknown.
func parseNodeTimeout(cfg cty.Value) (time.Duration, error) {
	if cfg == cty.NilVal || cfg.IsNull() || !cfg.Type().IsObjectType() || !cfg.Type().HasAttribute(attrNodeTimeout) {
		return defaultNodeTimeout, nil
	}
	v := cfg.GetAttr(attrNodeTimeout)
	if v.IsNull() || !v.IsKnown() {
		return defaultNodeTimeout, nil
	}
	s, err := drivers.String(v)
	if err != nil {
		return 0, err
	}
	return checkNodeTimeout(s)
}

func checkNodeTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a duration like \"30s\" or \"2m\"", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("%q is under a second: no node or registry answers that reliably", s)
	}
	return d, nil
}

// nodeTimeout is the configured bound.
func (d *Driver) nodeTimeout() time.Duration {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.timeout <= 0 {
		return defaultNodeTimeout
	}
	return d.timeout
}

// errStalled is the cause of a bounded call's context when its bound ran
// out.
var errStalled = errors.New("stalled")

// bounded is a context for a call to what (a node, the registry) that
// is cancelled once it goes the bound without touch being called; done
// turns the error of a call that ran out into one that names what and
// the bound. stop releases it.
type bounded struct {
	ctx   context.Context
	what  string
	bound time.Duration
	timer *time.Timer
	out   atomic.Bool
	stop  context.CancelCauseFunc
}

func (d *Driver) bound(ctx context.Context, what string, bound time.Duration) *bounded {
	cctx, cancel := context.WithCancelCause(ctx)
	b := &bounded{ctx: cctx, what: what, bound: bound, stop: cancel}
	b.timer = time.AfterFunc(bound, func() { b.out.Store(true); cancel(errStalled) })
	return b
}

// touch records progress: the bound starts again.
func (b *bounded) touch() {
	if !b.out.Load() {
		b.timer.Reset(b.bound)
	}
}

// release stops the timer and the context.
func (b *bounded) release() { b.timer.Stop(); b.stop(nil) }

// err words err when the bound ran out.
func (b *bounded) err(err error) error {
	if err == nil || !b.out.Load() {
		return err
	}
	return fmt.Errorf("%s made no progress for %v (node_timeout of the runtime block), so bottlefile gave up: is it partitioned or down? (%v)", b.what, b.bound, err)
}

// reader touches b on every read that returns data.
func (b *bounded) reader(r io.Reader) io.Reader { return &touchReader{r: r, b: b} }

type touchReader struct {
	r io.Reader
	b *bounded
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.b.touch()
	}
	return n, err
}
