package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"github.com/bottlefile/bottlefile/drivers"
)

// podOf is the namespace and Pod name of a workload Read reported: its
// Name is "NAMESPACE/POD".
func podOf(obj drivers.LiveObject) (string, string, error) {
	if obj.Kind != kindPod && obj.Kind != kindGateway {
		return "", "", fmt.Errorf("%s is a %s, which keeps no log and runs no command", obj.Addr, obj.Kind)
	}
	ns, pod, ok := strings.Cut(obj.Name, "/")
	if !ok || ns == "" || pod == "" {
		return "", "", fmt.Errorf("%s: %q does not name a Pod", obj.Addr, obj.Name)
	}
	return ns, pod, nil
}

// Logs copies a workload's log (a gateway's is its decisions) from the
// API server. The API merges the container's stdout and stderr: all of
// it goes to stdout.
func (d *Driver) Logs(ctx context.Context, _ string, obj drivers.LiveObject, opts drivers.LogOptions, stdout, _ io.Writer) error {
	cs, _, err := d.client()
	if err != nil {
		return err
	}
	ns, pod, err := podOf(obj)
	if err != nil {
		return err
	}
	lo := &corev1.PodLogOptions{Follow: opts.Follow, Timestamps: opts.Timestamps}
	if !opts.Since.IsZero() {
		t := metav1.NewTime(opts.Since)
		lo.SinceTime = &t
	}
	if opts.Tail > 0 {
		n := int64(opts.Tail)
		lo.TailLines = &n
	}
	rc, err := cs.CoreV1().Pods(ns).GetLogs(pod, lo).Stream(ctx)
	if err != nil {
		return d.unreachable(fmt.Errorf("reading the log of %s (Pod %s/%s): %w", obj.Addr, ns, pod, err))
	}
	defer rc.Close()
	_, err = io.Copy(stdout, rc)
	if err != nil && opts.Follow && ctx.Err() != nil {
		return nil
	}
	return err
}

// Exec runs a command in a workload's container through the API
// server's exec (SPDY, or WebSocket where the server offers it).
func (d *Driver) Exec(ctx context.Context, _ string, obj drivers.LiveObject, req drivers.ExecRequest) (int, error) {
	cs, _, err := d.client()
	if err != nil {
		return 0, err
	}
	d.mu.RLock()
	rc := d.rest
	d.mu.RUnlock()
	if rc == nil {
		return 0, errors.New("exec needs the API server's address: the driver has a client but no configuration")
	}
	ns, pod, err := podOf(obj)
	if err != nil {
		return 0, err
	}
	po := &corev1.PodExecOptions{
		Command: req.Command,
		Stdin:   req.Stdin != nil,
		Stdout:  req.Stdout != nil,
		Stderr:  req.Stderr != nil && !req.TTY,
		TTY:     req.TTY,
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(po, scheme.ParameterCodec).URL()
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", u)
	if err != nil {
		return 0, err
	}
	exe := spdy
	// client-go copies stdout and stderr in two goroutines: writers a
	// caller shares between them (one buffer for both, as the conformance
	// suite passes) take turns, or the race detector fails and output is
	// lost.
	var mu sync.Mutex
	so := remotecommand.StreamOptions{Stdin: req.Stdin, Stdout: turns(&mu, req.Stdout), Tty: req.TTY}
	if !req.TTY {
		so.Stderr = turns(&mu, req.Stderr)
	}
	if req.TTY && req.Width > 0 && req.Height > 0 {
		so.TerminalSizeQueue = &fixedSize{size: &remotecommand.TerminalSize{Width: uint16(req.Width), Height: uint16(req.Height)}}
	}
	err = exe.StreamWithContext(ctx, so)
	var ee exec.CodeExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		return ee.Code, nil
	}
	return 0, d.unreachable(fmt.Errorf("running a command in %s (Pod %s/%s): %w", obj.Addr, ns, pod, err))
}

// fixedSize gives the terminal's size once.
type fixedSize struct{ size *remotecommand.TerminalSize }

func (f *fixedSize) Next() *remotecommand.TerminalSize {
	s := f.size
	f.size = nil
	return s
}

// turns is w written under mu (nil stays nil: no stream).
func turns(mu *sync.Mutex, w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	return lockedWriter{mu: mu, w: w}
}

// lockedWriter is a writer that holds a lock while it writes.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
