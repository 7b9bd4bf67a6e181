package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// eventLog records the engine's events that mention any of a set of marks
// (a lineage, a name prefix, an image reference). Other tests run beside
// this one on the same engine, so only events that are ours count.
type eventLog struct {
	mu     sync.Mutex // guards events
	events []events.Message
	cancel context.CancelFunc
	done   chan struct{}
}

func watchEvents(t *testing.T, cli *client.Client, marks ...string) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &eventLog{cancel: cancel, done: make(chan struct{})}
	msgs, errs := cli.Events(ctx, events.ListOptions{})
	go func() {
		defer close(l.done)
		for {
			select {
			case m := <-msgs:
				if mentions(m, marks) {
					l.mu.Lock()
					l.events = append(l.events, m)
					l.mu.Unlock()
				}
			case <-errs:
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

func mentions(m events.Message, marks []string) bool {
	texts := []string{m.Actor.ID}
	for k, v := range m.Actor.Attributes {
		texts = append(texts, k+"="+v)
	}
	for _, text := range texts {
		for _, mark := range marks {
			if strings.Contains(text, mark) {
				return true
			}
		}
	}
	return false
}

// stop waits for events in flight, then returns what was seen.
func (l *eventLog) stop() []events.Message {
	time.Sleep(500 * time.Millisecond) // the engine delivers events asynchronously
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]events.Message(nil), l.events...)
}

// TestE2EPlanHasNoSideEffects: while plan runs against a configuration that
// would replace a container, build an image, pull another and create a
// network, the engine sees none of it. The same watch during apply sees
// those events, so the check can fail.
func TestE2EPlanHasNoSideEffects(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, agentConfig, image, `["sleep", "600"]`)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	short := "bf-" + lineage[:8]

	ctxDir := filepath.Join(dir, "ctx")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM "+image+"\nCMD [\"sleep\", \"600\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := "bottlefile-test/absent-" + lineage[:8] + ":1"
	writeBottlefile(t, dir, agentConfig+`
agent "built" {
  build {
    context = "./ctx"
  }
}

agent "pulled" {
  image = %q
}
`, image, `["sleep", "700"]`, missing)

	watch := watchEvents(t, cli, lineage, short, missing)
	r := mustRun(t, dir, "plan")
	if !strings.Contains(r.stdout, "Plan:") {
		t.Fatalf("plan shows no changes:\n%s", r)
	}
	if seen := watch.stop(); len(seen) != 0 {
		for _, e := range seen {
			t.Errorf("plan caused an engine event: %s %s %s %v", e.Type, e.Action, e.Actor.ID, e.Actor.Attributes)
		}
	}

	// The control: apply does cause events the watch sees.
	watch = watchEvents(t, cli, lineage, short, missing)
	bottlefile(t, dir, "apply", "-auto-approve") // the pull of the missing image fails
	seen := watch.stop()
	actions := map[string]bool{}
	for _, e := range seen {
		actions[string(e.Type)+" "+string(e.Action)] = true
	}
	for _, want := range []string{"container create", "container destroy", "network create"} {
		if !actions[want] {
			t.Errorf("the watch saw no %q during apply (saw %v): it could not have caught plan either", want, actions)
		}
	}
}
