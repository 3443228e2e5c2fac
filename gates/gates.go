// Package gates runs the commands orch runs in a plan's code: its
// acceptance gates, orch.yaml's setup command and a bet's metric command.
// A Runner also measures a bet's metric for the lead loop (Measure), off
// its goroutine, the value going out on Measured.
//
// How the pieces fit. Run and RunTracked run one `sh -c` in its own process
// group, with a deadline that kills the whole group from outside: a command
// cannot outlive it by forking. A Runner is what one lead loop owns: it
// records the process groups of its commands (Track, in .orch/gates.pgids,
// so that a lead that stops or dies leaves none running: Stop kills them,
// and KillRecorded at the next start), and runs a plan attempt's gates
// (Start) in their own goroutine, in a scratch worktree of the plan's
// harvested commit under .orch/gates (the repo itself in shared isolation),
// readied as a worker's worktree is (the included files, the setup
// command). When they are done the evidence (GATES.md) is written and the
// verdict goes out on Finished, a channel the loop selects on; the Runner
// never calls into the loop. What the verdict means for the plan is the
// loop's to decide. orch integrate runs the same commands on the combined
// code with Run and Setup, in its own process.
package gates

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runas"
	"github.com/orch-dev/orch/plans"
)

// GatesFile is the evidence committed next to RESULT.md.
const GatesFile = "GATES.md"

// Config is what a Runner works with.
type Config struct {
	Root    string         // the repo (holds .orch/ and plans/)
	Repo    *git.Repo      // the repo's git, for the scratch worktrees
	Conf    *config.Config // orch.yaml: the setup command
	Timeout time.Duration  // bounds each acceptance command; 0 means DefaultGateTimeout
	// Fault, when set, is called at the named fault-injection point
	// ("gate-started"); tests only.
	Fault func(point string)
}

// Job is one plan's acceptance run, for one attempt.
type Job struct {
	Plan    string
	Attempt int
	Cmds    []string
	Dir     string // where they run in shared isolation: the repo
	// Rev, in worktree isolation, is the plan branch's harvested commit:
	// the gates run in a scratch worktree of it, so nothing they write
	// ends up in the worker's worktree (and on its branch).
	Rev    string
	Worker string // whose work it is (the setup command's ORCH_WORKER)
	// As is the worker's user (orch.yaml's run_as), nil for the lead's:
	// the gates run as the user whose code they test, never as the lead.
	As *runas.User
}

// Finished is the end of a Job: "passed", or what failed.
type Finished struct {
	Plan    string
	Attempt int
	Verdict string
}

// Runner runs one lead loop's gates and owns their process groups.
type Runner struct {
	cfg      Config
	orchDir  string
	finished chan Finished
	measured chan Measured
	stopped  chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	groups map[int]bool    // the process groups of commands running now (Track)
	runs   map[string]bool // the gate runs and measurements under way (claim)
	// stopping is set when Stop kills the groups on the loop's way out.
	stopping atomic.Bool
}

// New returns a Runner for the repo at cfg.Root.
func New(cfg Config) *Runner {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultGateTimeout
	}
	return &Runner{cfg: cfg, orchDir: orchdir.Of(cfg.Root), finished: make(chan Finished, 64), measured: make(chan Measured, 64), stopped: make(chan struct{})}
}

// Finished delivers the verdict of each Job once it is done and its
// evidence written. Nothing comes for a Job cut short by Stop.
func (r *Runner) Finished() <-chan Finished { return r.finished }

// Stopping says whether Stop was called: a command that ended then was
// killed by it, and its outcome means nothing.
func (r *Runner) Stopping() bool { return r.stopping.Load() }

// Stop kills every process group the Runner recorded, and those an earlier
// lead loop left listed; no command starts after it.
func (r *Runner) Stop() {
	r.stopping.Store(true)
	r.mu.Lock()
	for g := range r.groups {
		syscall.Kill(-g, syscall.SIGKILL)
	}
	r.mu.Unlock()
	KillRecorded(r.orchDir)
	r.stopOnce.Do(func() { close(r.stopped) })
}

// Start runs j's commands in their own goroutine, one after the other
// until one fails; the verdict goes out on Finished. A second Start of a
// Job that runs is a no-op (a second regate must not start a second run).
func (r *Runner) Start(j Job) {
	done, ok := r.claim(fmt.Sprintf("%s/%d", j.Plan, j.Attempt))
	if !ok {
		return
	}
	go func() {
		defer done()
		if f, ok := r.run(j); ok {
			select {
			case r.finished <- f:
			case <-r.stopped:
			}
		}
	}()
}

// MeasureJob is one run of a bet's metric command for the lead loop.
type MeasureJob struct {
	Plan  string
	Phase string // "baseline" (before the dispatch) or "harvest" (after it)
	// Run tells this run apart from others of the plan: its setup run
	// for a baseline, its attempt at harvest.
	Run    int
	Worker string
	Dir    string // the worker's checkout
	Cmd    string
	As     *runas.User // the worker's user, nil for the lead's
}

// Measured is a MeasureJob's outcome: the value, or why there is none.
type Measured struct {
	MeasureJob
	Value *float64
	Err   string
}

// Measured delivers each Measure's outcome. Nothing comes for a run cut
// short by Stop.
func (r *Runner) Measured() <-chan Measured { return r.measured }

// Measure runs j's metric command in its own goroutine, its process group
// tracked like a gate's; the outcome goes out on Measured. A second
// Measure of a job that runs is a no-op.
func (r *Runner) Measure(j MeasureJob) {
	done, ok := r.claim(fmt.Sprintf("measure %s %s %d", j.Plan, j.Phase, j.Run))
	if !ok {
		return
	}
	go func() {
		defer done()
		v, why := measure(j.Dir, j.Cmd, j.As, r.Track)
		if r.stopping.Load() {
			return // killed because the lead loop stops: the next start measures again
		}
		select {
		case r.measured <- Measured{MeasureJob: j, Value: v, Err: why}:
		case <-r.stopped:
		}
	}()
}

// claim marks the run key as running, false when it runs already; done
// lets it go once it ended.
func (r *Runner) claim(key string) (done func(), ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[key] {
		return nil, false
	}
	if r.runs == nil {
		r.runs = map[string]bool{}
	}
	r.runs[key] = true
	return func() {
		r.mu.Lock()
		delete(r.runs, key)
		r.mu.Unlock()
	}, true
}

// run runs j and writes its evidence; false when the Runner stopped.
func (r *Runner) run(j Job) (Finished, bool) {
	var results []Result
	verdict := "passed"
	dir, remove := j.Dir, func() {}
	if j.Rev != "" {
		d, rm, err := r.tree(j)
		if err != nil {
			verdict = "gates not run: " + err.Error()
			j.Cmds = nil
		} else {
			dir, remove = d, rm
		}
	}
	for _, c := range j.Cmds {
		res := RunTracked(dir, c, r.cfg.Timeout, j.As, r.Track)
		results = append(results, res)
		if res.Failed() {
			verdict = res.Summary()
			break
		}
	}
	remove() // before the verdict goes out: nothing of the run is left after it
	if r.stopping.Load() {
		return Finished{}, false // killed because the lead loop stops: the next start runs them again
	}
	if err := writeEvidence(r.cfg.Root, j.Plan, j.Attempt, results, verdict); err != nil {
		verdict = "gate evidence not written: " + err.Error()
	}
	return Finished{Plan: j.Plan, Attempt: j.Attempt, Verdict: verdict}, true
}

// tree makes the scratch worktree for j and returns it and how to remove
// it; the included files are copied and the setup command runs.
func (r *Runner) tree(j Job) (string, func(), error) {
	ctx := context.Background()
	repo := r.cfg.Repo
	dir := filepath.Join(r.orchDir, orchdir.Gates, fmt.Sprintf("%s-%d", j.Plan, j.Attempt))
	_ = repo.RemoveWorktree(ctx, dir) // left by a lead loop that died
	os.RemoveAll(dir)
	if err := repo.AddWorktree(ctx, dir, j.Rev); err != nil {
		return "", nil, err
	}
	done := func() { repo.RemoveWorktree(ctx, dir) }
	if err := fleet.CopyIncludes(ctx, repo, dir); err != nil {
		done()
		return "", nil, err
	}
	if err := j.As.GiveTree(dir); err != nil {
		done()
		return "", nil, err
	}
	if err := Setup(r.cfg.Conf, dir, j.Plan, j.Worker, j.As, r.Track); err != nil {
		done()
		return "", nil, err
	}
	return dir, done, nil
}

// writeEvidence writes the evidence file: each command, its exit code,
// wall time and the tail of its output.
func writeEvidence(root, plan string, attempt int, results []Result, verdict string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Acceptance gates: %s (attempt %d)\n\nRun by the lead loop in the plan's code (a scratch worktree of its branch; the repo itself in shared isolation). Verdict: **%s**\n", plan, attempt, verdict)
	for i, r := range results {
		fmt.Fprintf(&b, "\n## %d. `%s`\n\n- exit: %d\n- wall: %s\n", i+1, r.Cmd, r.Exit, r.Wall.Round(time.Millisecond))
		if r.TimedOut {
			b.WriteString("- timed out: the process group was killed\n")
		}
		if r.Err != "" {
			fmt.Fprintf(&b, "- error: %s\n", r.Err)
		}
		for _, out := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
			if out.text != "" {
				fmt.Fprintf(&b, "\n%s (last %d bytes at most):\n\n```\n%s\n```\n", out.name, maxCapture, strings.ReplaceAll(out.text, `\n`, "\n"))
			}
		}
	}
	return atomicfile.Write(filepath.Join(root, plans.Dir, plan, GatesFile), []byte(b.String()), 0o644)
}
