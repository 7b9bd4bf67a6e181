package operations

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// LogOptions choose what part of a log to show.
type LogOptions struct {
	Follow bool
	// Since, when not zero, leaves out lines written before it.
	Since time.Time
	// Tail, when positive, keeps only each workload's last Tail lines.
	Tail int
}

func (o LogOptions) driverOptions() drivers.LogOptions {
	return drivers.LogOptions{Follow: o.Follow, Since: o.Since, Tail: o.Tail}
}

// LogLine is one line a workload wrote.
type LogLine struct {
	Addr   string
	Time   time.Time
	Stderr bool
	Text   string
}

// AgentLogs shows the merged log of an agent's workloads (the agent, its
// sidecars, its gateway): emit is called once per line, in time order, or
// with Follow, as lines come (from one goroutine at a time).
func (op *Operation) AgentLogs(ctx context.Context, agent string, o LogOptions, emit func(LogLine)) hcl.Diagnostics {
	objs, diags := op.LiveObjects(ctx, agent)
	if diags.HasErrors() {
		return diags
	}
	var workloads []Live
	for _, l := range objs {
		if l.obj.State != "" || l.Running {
			workloads = append(workloads, l)
		}
	}
	if len(workloads) == 0 {
		return hcl.Diagnostics{errorDiag("No such workload", fmt.Sprintf("no runtime has a workload of %s; logs -previous shows the saved logs of workloads that are gone", agent))}
	}
	op.ReleaseState()
	sort.SliceStable(workloads, func(i, j int) bool { return lessWorkload(workloads[i].Addr, workloads[j].Addr) })

	var mu sync.Mutex // guards lines and emit
	var lines []LogLine
	collect := func(ln LogLine) {
		mu.Lock()
		defer mu.Unlock()
		if o.Follow {
			emit(ln)
			return
		}
		lines = append(lines, ln)
	}
	var wg sync.WaitGroup
	errs := make([]hcl.Diagnostics, len(workloads))
	for i, l := range workloads {
		wg.Go(func() {
			out, errw := newLineWriter(l.Addr, false, collect), newLineWriter(l.Addr, true, collect)
			opts := o
			errs[i] = l.logsTimestamped(ctx, opts, out, errw)
			out.Flush()
			errw.Flush()
		})
	}
	wg.Wait()
	for _, d := range errs {
		diags = append(diags, d...)
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].Time.Before(lines[j].Time) })
	for _, ln := range lines {
		emit(ln)
	}
	return diags
}

func (l Live) logsTimestamped(ctx context.Context, o LogOptions, stdout, stderr io.Writer) hcl.Diagnostics {
	lr, ok := drivers.As[drivers.LogReader](l.driver)
	if !ok {
		return hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Logs not available", Detail: fmt.Sprintf("the %s driver of runtime %q keeps no log of %s", l.Driver, l.Runtime, l.Addr)}}
	}
	opts := o.driverOptions()
	opts.Timestamps = true
	if err := lr.Logs(ctx, l.lineage, l.obj, opts, stdout, stderr); err != nil {
		return hcl.Diagnostics{errorDiag("Cannot read the log of "+l.Addr, err.Error())}
	}
	return nil
}

// lineWriter splits what a workload wrote, each line starting with its
// RFC 3339 time, into LogLines.
type lineWriter struct {
	addr   string
	stderr bool
	emit   func(LogLine)
	buf    []byte
}

func newLineWriter(addr string, stderr bool, emit func(LogLine)) *lineWriter {
	return &lineWriter{addr: addr, stderr: stderr, emit: emit}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// Flush emits a last line that had no newline.
func (w *lineWriter) Flush() {
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

func (w *lineWriter) line(s string) {
	ln := LogLine{Addr: w.addr, Stderr: w.stderr, Text: strings.TrimSuffix(s, "\r")}
	if stamp, text, ok := strings.Cut(ln.Text, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			ln.Time, ln.Text = t, text
		}
	}
	w.emit(ln)
}

// Saved logs: before apply removes a workload (replace, destroy, migrate)
// its log is saved under .bottlefile/logs/ADDR/, one file per workload,
// named for when it was saved and the workload's id. Each line is
// "TIME out|err TEXT".

// maxSavedLog caps one saved log; what is past it is left out.
const maxSavedLog = 16 << 20

// saveTimeout bounds how long saving one log may hold its delete back.
const saveTimeout = 15 * time.Second

func logsDir(dir string) string { return filepath.Join(dir, state.Dir, "logs") }

// saveLog saves the log of obj, a workload about to be removed, if its
// driver keeps logs. It returns the file written, "" when there is no log.
func saveLog(ctx context.Context, dir, lineage string, d drivers.Driver, obj drivers.LiveObject, at time.Time) (string, error) {
	lr, ok := drivers.As[drivers.LogReader](d)
	if !ok {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	folder := filepath.Join(logsDir(dir), obj.Addr)
	if err := os.MkdirAll(folder, 0o700); err != nil {
		return "", err
	}
	id := obj.ID
	if len(id) > 12 {
		id = id[:12]
	}
	path := filepath.Join(folder, at.UTC().Format("20060102T150405Z")+"-"+safeName(id)+".log")
	err := atomicfile.WriteFunc(path, 0o600, func(f io.Writer) error {
		return writeLog(ctx, lr, lineage, obj, bufio.NewWriter(f))
	})
	if err != nil {
		return "", err
	}
	return path, nil
}

// writeLog copies an object's log into bw, one line per entry, up to
// maxSavedLog bytes.
func writeLog(ctx context.Context, lr drivers.LogReader, lineage string, obj drivers.LiveObject, bw *bufio.Writer) error {
	written := 0
	var werr error
	write := func(ln LogLine) {
		if werr != nil || written >= maxSavedLog {
			return
		}
		stream := "out"
		if ln.Stderr {
			stream = "err"
		}
		n, err := fmt.Fprintf(bw, "%s %s %s\n", ln.Time.UTC().Format(time.RFC3339Nano), stream, ln.Text)
		written += n
		werr = err
	}
	out, errw := newLineWriter(obj.Addr, false, write), newLineWriter(obj.Addr, true, write)
	err := lr.Logs(ctx, lineage, obj, drivers.LogOptions{Timestamps: true}, out, errw)
	out.Flush()
	errw.Flush()
	if err == nil {
		err = werr
	}
	if err == nil {
		err = bw.Flush()
	}
	return err
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, s)
}

// PreviousLogs reads the saved logs of addr's workloads (an agent's: its
// own, its sidecars', its gateway's; or one workload's) in time order,
// with Since and Tail (per workload) applied. No runtime is asked.
func PreviousLogs(dir, addr string, o LogOptions) ([]LogLine, error) {
	root := logsDir(dir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []LogLine
	for _, e := range entries {
		if !e.IsDir() || (e.Name() != addr && !strings.HasPrefix(e.Name(), addr+".")) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, e.Name(), "*.log"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		var lines []LogLine
		for _, path := range files {
			more, err := readSavedLog(path, e.Name())
			if err != nil {
				return nil, err
			}
			lines = append(lines, more...)
		}
		if !o.Since.IsZero() {
			kept := lines[:0]
			for _, ln := range lines {
				if !ln.Time.Before(o.Since) {
					kept = append(kept, ln)
				}
			}
			lines = kept
		}
		if o.Tail > 0 && len(lines) > o.Tail {
			lines = lines[len(lines)-o.Tail:]
		}
		out = append(out, lines...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

func readSavedLog(path, addr string) ([]LogLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []LogLine
	for _, s := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if s == "" {
			continue
		}
		stamp, rest, _ := strings.Cut(s, " ")
		stream, text, _ := strings.Cut(rest, " ")
		t, _ := time.Parse(time.RFC3339Nano, stamp)
		lines = append(lines, LogLine{Addr: addr, Time: t, Stderr: stream == "err", Text: text})
	}
	return lines, nil
}

// logSaver saves the log of each workload a step is about to delete. A
// log that cannot be saved is a note on the step, never its failure.
type logSaver struct {
	executor.Hook
	op      *Operation
	lineage string
}

func (h logSaver) PreApply(s *planner.Step) {
	h.Hook.PreApply(s)
	c := s.Change
	if (s.Op != planner.StepDelete && s.Op != planner.StepArchive) || c.Live == nil || c.Live.State == "" || c.Live.ID == "" {
		return
	}
	rt, ok := h.op.Runtimes[c.Runtime]
	if !ok {
		return
	}
	path, err := saveLog(context.Background(), h.op.Dir, h.lineage, rt.Driver, *c.Live, h.op.now())
	switch {
	case err != nil:
		h.Note(s, fmt.Sprintf("its log could not be saved (%v); the apply goes on", err))
	case path != "":
		h.op.Log.Debug("saved the log of a workload before removing it", "addr", c.Addr, "path", path)
	}
}

// Note passes a note on to the wrapped hook, if it shows notes.
func (h logSaver) Note(s *planner.Step, note string) {
	if n, ok := h.Hook.(executor.Noter); ok {
		n.Note(s, note)
	}
}
