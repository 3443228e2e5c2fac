package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/internal/logfmt"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/lead"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/tmux"
)

// Options configure a demo run.
type Options struct {
	Out     io.Writer
	OrchBin string // path of the orch binary (runs the scripted agent)
	BinDir  string // where orch-notify is
	Dir     string // scratch repo; empty makes a temporary one
	Workers int
	Keep    bool // leave the tmux session running at the end
}

// demoPlans: six plans, a small dependency graph, each with a bit of work.
// The api plan is verified by another worker, tests has an acceptance gate
// the lead loop runs itself, and docs claims more than it did: its
// verifier refutes it.
var demoPlans = []struct {
	name, body string
	deps       []string
	accept     []string
	verify     int
}{
	{"schema", "Define the data schema.\nagent: sleep 900ms\nagent: write src/schema.sql create table users (id int);\nagent: status schema defined: 1 table", nil, nil, 0},
	{"lint-config", "Add a lint configuration.\nagent: sleep 700ms\nagent: write .lint.toml strict = true\nagent: status lint config added", nil, nil, 0},
	{"api", "Implement the API on the schema.\nagent: sleep 1200ms\nagent: write src/api.go package api\nagent: status api: 3 endpoints\nagent: claim `test -f src/api.go` passes", []string{"schema"}, nil, 1},
	{"client", "Implement the client on the schema.\nagent: sleep 1000ms\nagent: write src/client.go package client\nagent: status client generated", []string{"schema"}, nil, 0},
	{"tests", "Test the API through the client.\nagent: sleep 1100ms\nagent: write src/api_test.go package api\nagent: status 12 tests pass", []string{"api", "client"}, []string{"test -f src/api_test.go"}, 0},
	{"docs", "Document the API.\nagent: sleep 600ms\nagent: write docs/API.md # API\nagent: status docs written\nagent: claim `grep -q endpoints docs/API.md` passes", []string{"api", "lint-config"}, nil, 1},
}

// Run runs the whole loop on a scratch repo: init, plans, a fleet of
// scripted agents in tmux, dispatch, callbacks as they arrive, then the
// status and the ledger.
func Run(ctx context.Context, o Options) (err error) {
	start := time.Now()
	if _, err := exec.LookPath("tmux"); err != nil {
		return ErrNoTmux
	}
	if _, err := os.Stat(filepath.Join(o.BinDir, "orch-notify")); err != nil {
		return ErrNoNotify
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "orch-demo-"); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "orch demo: scratch repo %s, %d scripted workers in tmux\n\n", o.Dir, o.Workers)
	if _, err := orchctl.Init(ctx, o.Dir); err != nil {
		return err
	}
	for _, p := range demoPlans {
		if _, err := orchctl.NewPlan(ctx, o.Dir, &plans.Plan{Name: p.name, DependsOn: p.deps, Acceptance: p.accept, Verify: p.verify, Body: p.body + "\n"}); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "wrote %d plans: schema → api, client → tests; api, lint-config → docs\n", len(demoPlans))
	fmt.Fprintf(o.Out, "  api and docs are verified by another worker; tests has an acceptance gate; docs claims more than it did\n")
	fmt.Fprintf(o.Out, "  each worker edits its own git worktree, one branch per plan; orch integrate merges the approved ones at the end\n\n")

	socket := "orch-demo-" + strconv.Itoa(os.Getpid())
	tc := tmux.New(socket)
	defer func() {
		if !o.Keep {
			tc.KillServer(context.Background())
		}
	}()
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan string, 1)
	loopErr := make(chan error, 1)
	go func() {
		loopErr <- lead.Run(loopCtx, lead.Config{
			Root: o.Dir, Workers: o.Workers, Agent: fleet.ShellQuote(o.OrchBin) + " agent",
			TmuxSocket: socket, BinDir: o.BinDir,
			Logger: slog.New(logfmt.NewLineHandler(o.Out, slog.LevelInfo)),
			Ready:  func(url string) { ready <- url },
		})
	}()
	select {
	case <-ready:
	case err := <-loopErr:
		return fmt.Errorf("lead loop: %w", err)
	}
	fmt.Fprintf(o.Out, "\nwatch the fleet: tmux -L %s attach -t %s\n\n", socket, tmux.SessionName(o.Dir))
	for _, p := range demoPlans {
		if _, err := orchctl.Dispatch(ctx, o.Dir, p.name, "", orchctl.DefaultVerdictWait); err != nil {
			return err
		}
	}
	for i := 0; i < len(demoPlans); i++ {
		if _, err := orchctl.Wait(ctx, o.Dir, 30*time.Second, func(cb event.Callback) error {
			_, err := fmt.Fprintf(o.Out, ">>> callback %d/%d: %s\n", i+1, len(demoPlans), cb.Line)
			return err
		}); err != nil {
			return err
		}
	}
	// Each worker edited its own worktree, on branch orch/<plan>: bring the
	// approved plans into main, in dependency order, gates run again.
	fmt.Fprintf(o.Out, "\norch integrate: approved plans into main, in dependency order\n")
	steps, err := integrate.Run(ctx, o.Dir, integrate.Options{Progress: prefixed{o.Out, ">>> "}})
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s.Outcome == integrate.Skipped {
			continue // nothing recorded, no callback
		}
		if _, err := orchctl.Wait(ctx, o.Dir, 30*time.Second, func(event.Callback) error { return nil }); err != nil {
			return err
		}
	}
	stop()
	if err := <-loopErr; err != nil {
		return err
	}
	v, err := orchctl.Status(o.Dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\nall %d plans settled in %.1fs\n\n", len(demoPlans), time.Since(start).Seconds())
	printSummary(o.Out, v, o.Dir)
	if r, _, err := orchctl.Stats(ctx, o.Dir); err == nil {
		fmt.Fprintln(o.Out, "\norch stats (from the ledger and the committed verification matrices):")
		r.WriteText(o.Out)
		fmt.Fprintln(o.Out, "(the demo's scripted agents record no tokens; Claude Code and Codex do, read at each turn's end)")
	}
	fmt.Fprintf(o.Out, "\nsee the harvest, ledger and integration commits: git -C %s log --oneline --graph\n", o.Dir)
	fmt.Fprintf(o.Out, "watch a fleet live: orch watch (terminal), orch serve --http 127.0.0.1:0 (browser)\n")
	return nil
}

func printSummary(w io.Writer, v orchctl.StatusView, dir string) {
	fmt.Fprintln(w, "orch status:")
	for _, wk := range v.Workers {
		fmt.Fprintf(w, "  %-4s %-5s\n", wk.ID, wk.State)
	}
	for _, p := range v.Plans {
		note := p.Status
		if p.Reason != "" {
			note = p.Reason
		}
		fmt.Fprintf(w, "  %-12s %-10s %-3s %.10s  %s\n", p.Name, p.State, p.Worker, p.Result, note)
	}
	entries, err := ledger.Load(dir)
	if err != nil {
		fmt.Fprintf(w, "\nledger: %v\n", err)
		return
	}
	fmt.Fprintf(w, "\nledger (%s, committed):\n", ledger.File)
	for _, e := range entries {
		fmt.Fprintf(w, "  #%d %-12s %-3s %.10s  %s\n", e.ID, e.Plan, e.Worker, e.Commit, e.Status)
	}
}

// prefixed writes each line with a prefix.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
