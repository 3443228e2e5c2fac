package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/logfmt"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/lead"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/tmux"
)

// logRec is one record of the lead loop's log.
type logRec struct {
	Msg   string
	Attrs map[string]string
	At    time.Time // when the loop logged it (slog's time.Now, with its monotonic reading)
}

// logTap is the lead loop's slog handler: it hands every record to the
// bench, which uses the lines the loop writes after it has finished with an
// event ("dispatched", "harvested") to know that the loop is idle again,
// without reading its state file in a loop.
type logTap struct {
	ch      chan logRec
	dropped *atomic.Int64
	attrs   []slog.Attr
	inner   slog.Handler // copy to stderr with -v; nil otherwise
}

func newLogTap(inner slog.Handler) *logTap {
	return &logTap{ch: make(chan logRec, 4096), dropped: new(atomic.Int64), inner: inner}
}

func (t *logTap) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (t *logTap) Handle(ctx context.Context, r slog.Record) error {
	rec := logRec{Msg: r.Message, Attrs: map[string]string{}, At: r.Time}
	for _, a := range t.attrs {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	select {
	case t.ch <- rec:
	default:
		t.dropped.Add(1)
	}
	if t.inner != nil {
		return t.inner.Handle(ctx, r)
	}
	return nil
}

func (t *logTap) WithAttrs(as []slog.Attr) slog.Handler {
	c := *t
	c.attrs = append(append([]slog.Attr(nil), t.attrs...), as...)
	if t.inner != nil {
		c.inner = t.inner.WithAttrs(as)
	}
	return &c
}

func (t *logTap) WithGroup(string) slog.Handler { return t }

// drain forgets the records logged so far.
func (t *logTap) drain() {
	for {
		select {
		case <-t.ch:
		default:
			return
		}
	}
}

// waitFor returns the first record for which match says done.
func (t *logTap) waitFor(ctx context.Context, timeout time.Duration, what string, match func(logRec) bool) (logRec, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case r := <-t.ch:
			if match(r) {
				return r, nil
			}
		case <-timer.C:
			if n := t.dropped.Load(); n > 0 {
				return logRec{}, fmt.Errorf("no %q from the lead loop within %v (%d log records dropped)", what, timeout, n)
			}
			return logRec{}, fmt.Errorf("no %q from the lead loop within %v", what, timeout)
		case <-ctx.Done():
			return logRec{}, ctx.Err()
		}
	}
}

const (
	benchPlan   = "bench"
	benchWorker = "w1"
)

// scratchLead is a lead loop on a scratch repo with one worker pane running
// cat, in this process.
type scratchLead struct {
	root, orchDir, url, socket string
	tap                        *logTap
	stop                       context.CancelFunc
	errc                       chan error
	round                      int

	accepted int
	refused  map[string]int // reason -> count
	spooled  int            // done events the loop got from the spool, not from an ack
}

func startLead(ctx context.Context, dir, socket string, verbose bool) (*scratchLead, error) {
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return nil, err
	}
	res, err := orchctl.Init(ctx, repo)
	if err != nil {
		return nil, err
	}
	s := &scratchLead{root: res.Root, orchDir: orchdir.Of(res.Root), refused: map[string]int{},
		socket: socket}
	if _, err := orchctl.NewPlan(ctx, s.root, &plans.Plan{Name: benchPlan,
		Body: "A plan for go run ./bench: write RESULT.md, then orch-notify done bench ok.\n"}); err != nil {
		return nil, err
	}
	var inner slog.Handler
	if verbose {
		inner = logfmt.NewLineHandler(os.Stderr, slog.LevelInfo)
	}
	s.tap = newLogTap(inner)
	loopCtx, stop := context.WithCancel(ctx)
	s.stop, s.errc = stop, make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		s.errc <- lead.Run(loopCtx, lead.Config{
			Root: s.root, Workers: 1, Agent: "cat", TmuxSocket: s.socket,
			Isolation: "shared", // as in the burst: the loop's own path is measured
			Logger:    slog.New(s.tap),
			Ready:     func(url string) { ready <- url },
		})
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case s.url = <-ready:
		return s, nil
	case err := <-s.errc:
		s.errc <- err
		s.close()
		return nil, fmt.Errorf("lead loop: %w", err)
	case <-timer.C:
		s.close()
		return nil, errors.New("lead loop not ready within 30s")
	case <-ctx.Done():
		s.close()
		return nil, ctx.Err()
	}
}

func (s *scratchLead) close() {
	s.stop()
	<-s.errc
	killTmux(s.socket)
}

// notifyEnv is what the worker pane's process gets from orch serve (the
// scratch lead's broker uses the default prefix).
func (s *scratchLead) notifyEnv() []string {
	return workerEnv(s.url, s.orchDir, benchWorker, event.DefaultPrefix)
}

// workerEnv is the environment orch serve gives a worker's processes, on
// top of this process's own (cleaned of ORCH_ and Go runtime settings):
// the broker at url, the worker credentials and runtime directory orchDir.
func workerEnv(url, orchDir, worker, prefix string) []string {
	return append(cleanEnv(),
		"ORCH_URL="+url,
		"ORCH_CREDS="+orchdir.WorkerKey(orchDir, worker),
		"ORCH_WORKER="+worker,
		"ORCH_DIR="+orchDir,
		"ORCH_PREFIX="+prefix,
	)
}

// prepDone makes the next done event one the lead loop accepts: a new
// RESULT.md, and the plan dispatched (typed into w1's pane) again. It
// returns once the loop has logged the dispatch, which it does after the
// tmux send-keys, so the loop is idle when the timed run starts.
func (s *scratchLead) prepDone(ctx context.Context) error {
	s.round++
	result := fmt.Sprintf("# bench, round %d\n\nok\n", s.round)
	if err := os.WriteFile(plans.ResultPath(s.root, benchPlan), []byte(result), 0o644); err != nil {
		return err
	}
	s.tap.drain()
	if _, err := orchctl.Dispatch(ctx, s.root, benchPlan, benchWorker, 0); err != nil {
		return err
	}
	r, err := s.tap.waitFor(ctx, 15*time.Second, "dispatched", func(r logRec) bool {
		return r.Attrs["plan"] == benchPlan && (r.Msg == "dispatched" || r.Msg == "refused" || strings.HasPrefix(r.Msg, "dispatch failed"))
	})
	if err != nil {
		return err
	}
	if r.Msg != "dispatched" {
		return fmt.Errorf("dispatch of %s: %s %v", benchPlan, r.Msg, r.Attrs)
	}
	return nil
}

// settleDone waits until the lead loop has handled the done event (it
// harvests after the broker's ack, so this is outside the timed run) and
// records whether it was accepted.
func (s *scratchLead) settleDone(ctx context.Context) error {
	r, err := s.tap.waitFor(ctx, 15*time.Second, "harvested", func(r logRec) bool {
		if harvestedOne(r.Msg, r.Attrs, benchPlan) {
			return true
		}
		if r.Attrs["plan"] != benchPlan {
			return false
		}
		if r.Msg == "spool: delivered" {
			s.spooled++ // orch-notify exited 0 without an ack: the run timed is not a durable publish
			return false
		}
		return r.Msg == "refused" || strings.HasPrefix(r.Msg, "done without") || strings.HasPrefix(r.Msg, "event not handled")
	})
	if err != nil {
		return err
	}
	if harvestedOne(r.Msg, r.Attrs, benchPlan) {
		s.accepted++
		return nil
	}
	why := r.Attrs["reason"]
	if why == "" {
		why = r.Attrs["err"]
	}
	s.refused[r.Msg+": "+why]++
	return nil
}

// resetCounts forgets the warm-up rounds' outcomes.
func (s *scratchLead) resetCounts() {
	s.accepted = 0
	s.refused = map[string]int{}
	s.spooled = 0
}

// keysPane is a pane running cat on a private tmux server of its own, the
// target of the send-keys case.
type keysPane struct {
	socket, pane string
}

func startKeysPane(ctx context.Context, dir string) (*keysPane, error) {
	k := &keysPane{socket: fmt.Sprintf("orch-bench-%d-keys", os.Getpid())}
	var err error
	k.pane, err = tmux.New(k.socket).NewSession(ctx, "keys", dir, nil, "cat")
	if err != nil {
		killTmux(k.socket)
		return nil, err
	}
	return k, nil
}

func (k *keysPane) close() { killTmux(k.socket) }

// killTmux stops the private tmux server and removes its socket file, which
// tmux 3.3a leaves behind.
func killTmux(socket string) {
	out, _ := exec.Command("tmux", "-L", socket, "display-message", "-p", "#{socket_path}").Output()
	tmux.New(socket).KillServer(context.Background())
	if path := strings.TrimSpace(string(out)); path != "" && filepath.Base(path) == socket {
		os.Remove(path)
	}
}

// cleanEnv is this process's environment without anything that would change
// how orch-notify or the Go runtime behave.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ORCH_") || strings.HasPrefix(kv, "GODEBUG=") || strings.HasPrefix(kv, "GOGC=") ||
			strings.HasPrefix(kv, "GOMAXPROCS=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// harvestedPlans is the plans a log line says were harvested: one for
// "harvested plan=X", every name in the comma-separated plans list for a
// batch ("harvested together plans=a,b,c count=3"), none for any other line.
func harvestedPlans(msg string, attrs map[string]string) []string {
	switch msg {
	case "harvested":
		if p := attrs["plan"]; p != "" {
			return []string{p}
		}
	case "harvested together":
		var out []string
		for _, p := range strings.Split(attrs["plans"], ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	return nil
}

// harvestedOne says whether a log line says plan was harvested, alone or in a batch.
func harvestedOne(msg string, attrs map[string]string, plan string) bool {
	for _, p := range harvestedPlans(msg, attrs) {
		if p == plan {
			return true
		}
	}
	return false
}
