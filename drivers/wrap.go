package drivers

import (
	"context"
	"fmt"
	"io"
)

// Wrapper is a driver around another one (Inner) that can watch its Apply
// calls, as the crash tests' hook does. It keeps everything the inner
// driver has: its name and Declaration, and each optional interface
// (Closer, WrittenReader, SnapshotExporter, SnapshotImporter, LogReader,
// ExitDescriber, Settler, Execer, BottleForgetter, EngineIdentifier,
// EngineNamer, Stopper, ActivityReader)
// the inner one implements, which As finds through it. Wrapper has every
// optional method, so callers must ask As, never assert on a driver's type.
type Wrapper struct {
	Inner Driver
	// AfterApply, when set, runs after each Apply returns from Inner,
	// before the caller sees the result.
	AfterApply func(req ApplyRequest, resp ApplyResponse, err error)
}

var (
	_ Driver           = (*Wrapper)(nil)
	_ Closer           = (*Wrapper)(nil)
	_ WrittenReader    = (*Wrapper)(nil)
	_ SnapshotExporter = (*Wrapper)(nil)
	_ SnapshotImporter = (*Wrapper)(nil)
	_ LogReader        = (*Wrapper)(nil)
	_ ExitDescriber    = (*Wrapper)(nil)
	_ Settler          = (*Wrapper)(nil)
	_ Execer           = (*Wrapper)(nil)
	_ BottleForgetter  = (*Wrapper)(nil)
	_ EngineIdentifier = (*Wrapper)(nil)
	_ EngineNamer      = (*Wrapper)(nil)
	_ Stopper          = (*Wrapper)(nil)
	_ ActivityReader   = (*Wrapper)(nil)
)

// Unwrap is the wrapped driver.
func (w *Wrapper) Unwrap() Driver { return w.Inner }

func (w *Wrapper) Name() string         { return w.Inner.Name() }
func (w *Wrapper) Declare() Declaration { return w.Inner.Declare() }
func (w *Wrapper) Configure(ctx context.Context, req ConfigureRequest) error {
	return w.Inner.Configure(ctx, req)
}
func (w *Wrapper) Read(ctx context.Context, req ReadRequest) (ReadResponse, error) {
	return w.Inner.Read(ctx, req)
}
func (w *Wrapper) Plan(ctx context.Context, req PlanRequest) (PlanResponse, error) {
	return w.Inner.Plan(ctx, req)
}

func (w *Wrapper) Apply(ctx context.Context, req ApplyRequest) (ApplyResponse, error) {
	resp, err := w.Inner.Apply(ctx, req)
	if w.AfterApply != nil {
		w.AfterApply(req, resp, err)
	}
	return resp, err
}

// errNotImplemented is what an optional method of a Wrapper returns when
// the inner driver lacks it; As never hands such a Wrapper out.
func (w *Wrapper) errNotImplemented(iface string) error {
	return fmt.Errorf("the %s driver does not implement %s", w.Inner.Name(), iface)
}

func (w *Wrapper) Close() error {
	if c, ok := As[Closer](w.Inner); ok {
		return c.Close()
	}
	return nil
}

func (w *Wrapper) ForgetBottle(lineage, agent string) error {
	if f, ok := As[BottleForgetter](w.Inner); ok {
		return f.ForgetBottle(lineage, agent)
	}
	return w.errNotImplemented("BottleForgetter")
}

func (w *Wrapper) EngineID(ctx context.Context) (string, error) {
	if e, ok := As[EngineIdentifier](w.Inner); ok {
		return e.EngineID(ctx)
	}
	return "", w.errNotImplemented("EngineIdentifier")
}

func (w *Wrapper) EngineName(lineage string, o Object) string {
	if n, ok := As[EngineNamer](w.Inner); ok {
		return n.EngineName(lineage, o)
	}
	return ""
}

func (w *Wrapper) Written(ctx context.Context, lineage string, obj LiveObject) (Written, error) {
	if r, ok := As[WrittenReader](w.Inner); ok {
		return r.Written(ctx, lineage, obj)
	}
	return Written{}, w.errNotImplemented("WrittenReader")
}

func (w *Wrapper) ExportSnapshot(ctx context.Context, image string, out io.Writer) error {
	if e, ok := As[SnapshotExporter](w.Inner); ok {
		return e.ExportSnapshot(ctx, image, out)
	}
	return w.errNotImplemented("SnapshotExporter")
}

func (w *Wrapper) ImportSnapshot(ctx context.Context, req ImportRequest, r io.Reader) (ApplyResponse, error) {
	if i, ok := As[SnapshotImporter](w.Inner); ok {
		return i.ImportSnapshot(ctx, req, r)
	}
	return ApplyResponse{}, w.errNotImplemented("SnapshotImporter")
}

func (w *Wrapper) Logs(ctx context.Context, lineage string, obj LiveObject, opts LogOptions, stdout, stderr io.Writer) error {
	if l, ok := As[LogReader](w.Inner); ok {
		return l.Logs(ctx, lineage, obj, opts, stdout, stderr)
	}
	return w.errNotImplemented("LogReader")
}

func (w *Wrapper) DescribeExit(ctx context.Context, lineage string, obj LiveObject) (*Exit, error) {
	if e, ok := As[ExitDescriber](w.Inner); ok {
		return e.DescribeExit(ctx, lineage, obj)
	}
	return nil, w.errNotImplemented("ExitDescriber")
}

func (w *Wrapper) StopWorkload(ctx context.Context, req StopRequest) error {
	if s, ok := As[Stopper](w.Inner); ok {
		return s.StopWorkload(ctx, req)
	}
	return w.errNotImplemented("Stopper")
}

func (w *Wrapper) Settle(ctx context.Context, req SettleRequest) error {
	if s, ok := As[Settler](w.Inner); ok {
		return s.Settle(ctx, req)
	}
	return w.errNotImplemented("Settler")
}

func (w *Wrapper) Exec(ctx context.Context, lineage string, obj LiveObject, req ExecRequest) (int, error) {
	if x, ok := As[Execer](w.Inner); ok {
		return x.Exec(ctx, lineage, obj, req)
	}
	return 0, w.errNotImplemented("Execer")
}

func (w *Wrapper) Activity(ctx context.Context, req ActivityRequest) (map[string]Activity, error) {
	if a, ok := As[ActivityReader](w.Inner); ok {
		return a.Activity(ctx, req)
	}
	return nil, w.errNotImplemented("ActivityReader")
}

// As returns d as the optional interface T when d has it: d itself, or,
// for a driver that wraps another (Unwrap() Driver), the wrapper when the
// driver it wraps has it, so the wrapper's watch stays in the way. It is
// how the core asks for an optional interface.
func As[T any](d Driver) (T, bool) {
	var zero T
	if d == nil {
		return zero, false
	}
	if u, ok := d.(interface{ Unwrap() Driver }); ok {
		if _, ok := As[T](u.Unwrap()); !ok {
			return zero, false
		}
		if t, ok := d.(T); ok {
			return t, true
		}
		return As[T](u.Unwrap())
	}
	t, ok := d.(T)
	return t, ok
}
