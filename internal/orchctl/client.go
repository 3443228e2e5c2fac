package orchctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// This file holds what the orch CLI does besides serve: each function works
// on the repo and, where it must, talks to the running lead loop through the
// broker. None of them mutates the lead loop's state file: changes reach
// the loop as commands in the stream, so the loop stays its only writer.

// FindRoot returns the main repo root for dir (a linked worktree counts as
// the repo).
func FindRoot(ctx context.Context, dir string) (string, error) {
	r, err := git.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	return r.Root, nil
}

// WithGitLock runs fn holding the lock that serialises orch's commits.
func WithGitLock(root string, fn func() error) error {
	lk, err := flock.Exclusive(filepath.Join(orchdir.Of(root), orchdir.GitLock))
	if err != nil {
		return err
	}
	defer lk.Unlock()
	return fn()
}

// InitResult says what Init did.
type InitResult struct {
	Root    string `json:"root"`
	Created bool   `json:"created_repo"`
	Commit  string `json:"commit,omitempty"`
}

// Init prepares dir for orch: a git repo (made if missing), .orch/ with the
// role credentials, plans/, the ledger, and .orch/ in .gitignore. Running it
// again changes nothing.
func Init(ctx context.Context, dir string) (InitResult, error) {
	var res InitResult
	repo, err := git.Open(ctx, dir)
	if errors.Is(err, git.ErrNotRepo) {
		if err := git.Init(ctx, dir); err != nil {
			return res, fmt.Errorf("init: %w", err)
		}
		res.Created = true
		repo, err = git.Open(ctx, dir)
	}
	if err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	root := repo.Root
	res.Root = root
	od := orchdir.Of(root)
	if err := os.MkdirAll(od, 0o700); err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	if err := os.Chmod(od, 0o700); err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	if err := broker.EnsureCreds(od); err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	var paths []string
	if changed, err := ensureLine(filepath.Join(root, ".gitignore"), "/"+orchdir.Name+"/"); err != nil {
		return res, fmt.Errorf("init: %w", err)
	} else if changed {
		paths = append(paths, ".gitignore")
	}
	keep := filepath.Join(root, plans.Dir, ".gitkeep")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	if _, err := os.Stat(keep); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(keep, nil, 0o644); err != nil {
			return res, fmt.Errorf("init: %w", err)
		}
		paths = append(paths, plans.Dir+"/.gitkeep")
	}
	if _, err := os.Stat(filepath.Join(root, ledger.File)); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(filepath.Join(root, ledger.File), nil, 0o644); err != nil {
			return res, fmt.Errorf("init: %w", err)
		}
		paths = append(paths, ledger.File)
	}
	if len(paths) == 0 {
		return res, nil
	}
	err = WithGitLock(root, func() error {
		sha, err := repo.Commit(ctx, "orch init\n", paths...)
		if errors.Is(err, git.ErrNothingToCommit) {
			return nil
		}
		res.Commit = sha
		return err
	})
	if err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	return res, nil
}

// ensureLine appends line to the file unless a line equal to it (or to its
// common spellings) is already there.
func ensureLine(path, line string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	bare := strings.Trim(line, "/")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Trim(strings.TrimSpace(l), "/") == bare {
			return false, nil
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, line+"\n"...)
	return true, os.WriteFile(path, data, 0o644)
}

// NewPlan writes plans/<name>/PLAN.md and commits it. Nothing is written
// when the name, a dependency or the graph is wrong.
func NewPlan(ctx context.Context, root string, p *plans.Plan) (string, error) {
	if err := plans.ValidateName(p.Name); err != nil {
		return "", err
	}
	if err := p.Validate(); err != nil {
		return "", err
	}
	if err := checkAgents(root, p); err != nil {
		return "", fmt.Errorf("plan new %s: %w", p.Name, err)
	}
	all, err := loadForGraph(root, p.Name)
	if err != nil {
		return "", fmt.Errorf("plan new %s: %w", p.Name, err)
	}
	if _, ok := all[p.Name]; ok {
		return "", fmt.Errorf("plan new %s: %w", p.Name, plans.ErrPlanExists)
	}
	all[p.Name] = p
	if err := plans.CheckGraph(all); err != nil {
		return "", fmt.Errorf("plan new %s: %w", p.Name, err)
	}
	repo, err := git.Open(ctx, root)
	if err != nil {
		return "", err
	}
	var sha string
	err = WithGitLock(root, func() error {
		if err := plans.Write(root, p); err != nil {
			return err
		}
		sha, err = repo.Commit(ctx, "plan "+p.Name+"\n", plans.RelPlanPath(p.Name))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("plan new %s: %w", p.Name, err)
	}
	return sha, nil
}

// loadForGraph loads the plans for a dependency check about the plan
// name: a broken folder of another plan counts as a plan without
// dependencies (it is reported by orch status, and fails only itself); a
// broken folder of name is the error.
func loadForGraph(root, name string) (map[string]*plans.Plan, error) {
	all, bad, err := plans.LoadEach(root)
	if err != nil {
		return nil, err
	}
	for _, b := range bad {
		if b.Name == name {
			return nil, b.Err
		}
		if _, ok := all[b.Name]; !ok && plans.ValidateName(b.Name) == nil {
			all[b.Name] = &plans.Plan{Name: b.Name}
		}
	}
	return all, nil
}

// Dispatch asks the lead loop to queue a plan. The plan and its graph are
// checked first; if orch serve is not running, the command is spooled and
// takes effect when it starts. Otherwise it waits up to wait for the loop's
// verdict (SendCommand): a refusal is an error.
func Dispatch(ctx context.Context, root, name, to string, wait time.Duration) (DispatchResult, error) {
	res := DispatchResult{Plan: name}
	if err := plans.ValidateName(name); err != nil {
		return res, err
	}
	if to != "" && !event.ValidWorker(to) {
		return res, fmt.Errorf("dispatch %s: %w: --to %q is not a worker id like w1", name, ErrNoFleet, to)
	}
	all, err := loadForGraph(root, name)
	if err != nil {
		return res, fmt.Errorf("dispatch %s: %w", name, err)
	}
	if _, ok := all[name]; !ok {
		return res, fmt.Errorf("dispatch %s: %w (write it with orch plan new %s)", name, plans.ErrNoPlan, name)
	}
	if err := plans.CheckGraph(all); err != nil {
		return res, fmt.Errorf("dispatch %s: %w", name, err)
	}
	if err := checkAgents(root, all[name]); err != nil {
		return res, fmt.Errorf("dispatch %s: %w", name, err)
	}
	return SendCommand(root, event.New(event.Dispatch, name, "", to, ""), wait)
}

// Verify asks the lead loop to have the plan's claims verified by workers
// other than its author, in 1 or 3 rounds, and waits for its verdict like
// Dispatch.
func Verify(ctx context.Context, root, name string, rounds int, wait time.Duration) (DispatchResult, error) {
	res := DispatchResult{Plan: name}
	if err := plans.ValidateName(name); err != nil {
		return res, err
	}
	if rounds != 1 && rounds != 3 {
		return res, fmt.Errorf("verify %s: %w: --rounds must be 1 or 3", name, ErrBadRounds)
	}
	if _, err := plans.Load(root, name); err != nil {
		return res, fmt.Errorf("verify %s: %w", name, err)
	}
	return SendCommand(root, event.New(event.Verify, name, fmt.Sprint(rounds), "", ""), wait)
}

// Report is one plan's verification matrix, for orch report.
type Report struct {
	Plan string `json:"plan"`
	*plans.Verification
}

// Reports returns the verification matrices of the named plan, or of every
// plan that has one.
func Reports(root, name string) ([]Report, error) {
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return nil, err
	}
	out := []Report{}
	for _, n := range slices.Sorted(maps.Keys(st.Plans)) {
		p := st.Plans[n]
		if p.Verification != nil && (name == "" || name == n) {
			out = append(out, Report{Plan: n, Verification: p.Verification})
		}
	}
	if name != "" && len(out) == 0 {
		return nil, fmt.Errorf("report %s: %w (orch verify %s puts it to verification)", name, ErrNotVerified, name)
	}
	return out, nil
}

// Wait blocks until the lead loop has a callback the lead has not seen and
// hands it to deliver (which prints it). Only once deliver has succeeded
// is the callback taken, so the next Wait gets the next one; when deliver
// fails (a full disk, a closed pipe), the callback stays for the next Wait.
func Wait(ctx context.Context, root string, timeout time.Duration, deliver func(event.Callback) error) (event.Callback, error) {
	var cb event.Callback
	if !Serving(root) {
		return cb, fmt.Errorf("wait: %w", ErrNotServing)
	}
	cfg, err := notify.LeadConfig(orchdir.Of(root))
	if err != nil {
		return cb, fmt.Errorf("wait: %w", err)
	}
	nc, err := notify.Connect(cfg, "orch-wait")
	if err != nil {
		return cb, fmt.Errorf("wait: %w: %v", ErrNotServing, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return cb, fmt.Errorf("wait: %w", err)
	}
	pc, err := js.PushConsumer(ctx, broker.StreamName, broker.WaitConsumer)
	if err != nil {
		return cb, fmt.Errorf("wait: %w", err)
	}
	got := make(chan jetstream.Msg, 1)
	cc, err := pc.Consume(func(m jetstream.Msg) {
		select {
		case got <- m:
		default: // cannot happen: the consumer has at most one message out
		}
	})
	if err != nil {
		return cb, fmt.Errorf("wait: %w", err)
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout) // one deadline, not a poll
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case m := <-got:
			if host, ok := broker.HostOf(m.Headers()); host != "" || !ok {
				// Only the lead loop writes callbacks; one sourced from a
				// host's stream is a forgery: dropped, and the wait goes on.
				m.Term()
				continue
			}
			return deliverOne(ctx, nc, cc, m, deliver)
		case <-timer:
			cc.Stop()
			return cb, fmt.Errorf("wait: %w after %s", ErrTimeout, timeout)
		case <-ctx.Done():
			cc.Stop()
			return cb, ctx.Err()
		}
	}
}

// deliverOne hands the callback m carries to deliver, then acknowledges it.
func deliverOne(ctx context.Context, nc *nats.Conn, cc jetstream.ConsumeContext, m jetstream.Msg, deliver func(event.Callback) error) (event.Callback, error) {
	// Stop interest before acknowledging, so the server does not push the
	// next callback to a client that is about to leave.
	cc.Stop()
	if err := nc.Flush(); err != nil {
		return event.Callback{}, fmt.Errorf("wait: %w", err)
	}
	cb, err := event.ParseCallback(m.Data())
	if err != nil {
		m.Term()
		return cb, fmt.Errorf("wait: %w", err)
	}
	if err := deliver(cb); err != nil {
		// Given back at once: the next orch wait gets this one again.
		m.Nak()
		nc.Flush()
		return cb, fmt.Errorf("wait: %w: %v (the callback stays for the next orch wait)", ErrNotDelivered, err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		return cb, fmt.Errorf("wait: acknowledge: %w", err)
	}
	return cb, nil
}

// Settle records a bet's measured outcome in the ledger, settled at now,
// and commits it.
func Settle(ctx context.Context, root string, id int, measured float64, outcome string, now time.Time) (ledger.Entry, error) {
	repo, err := git.Open(ctx, root)
	if err != nil {
		return ledger.Entry{}, err
	}
	var e ledger.Entry
	err = WithGitLock(root, func() error {
		if err := ledgerAppendOnly(ctx, repo, root); err != nil {
			return err
		}
		var err error
		if e, err = ledger.Settle(root, id, measured, outcome, now); err != nil {
			return err
		}
		_, err = repo.Commit(ctx, fmt.Sprintf("ledger #%d settled: %s (measured %g)\n", id, outcome, measured), ledger.File)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("settle #%d: %w", id, err)
	}
	return e, nil
}

// ledgerAppendOnly refuses to write the ledger while a line already
// committed is changed and not committed: the commit of what orch appends
// would sweep the change in.
func ledgerAppendOnly(ctx context.Context, repo *git.Repo, root string) error {
	data, err := ledger.Read(root)
	if err != nil {
		return err
	}
	committed, _, err := repo.ShowCommitted(ctx, "HEAD", ledger.File)
	if err != nil {
		return err
	}
	if err := ledger.CheckAppendOnly(committed, data); err != nil {
		return fmt.Errorf("%w; nothing written: commit the change (git commit %s) or undo it (git checkout -- %s), then run this again", err, ledger.File, ledger.File)
	}
	return nil
}

// CheckResult is what orch ledger check did with one bet.
type CheckResult struct {
	ID       int      `json:"id"`
	Plan     string   `json:"plan"`
	Measured *float64 `json:"measured,omitempty"`
	Outcome  string   `json:"outcome"` // won, lost, or open when it could not be measured
	Error    string   `json:"error,omitempty"`
}

// CheckBets re-runs the metric command of every open bet past its check-by
// date, now, and settles it against its target; a command that fails or
// prints no number is recorded as such and the bet stays open. Each result
// is committed, stamped with now.
func CheckBets(ctx context.Context, root string, now func() time.Time) ([]CheckResult, error) {
	repo, err := git.Open(ctx, root)
	if err != nil {
		return nil, err
	}
	entries, err := ledger.Load(root)
	if err != nil {
		return nil, err
	}
	out := []CheckResult{}
	for _, e := range ledger.Due(entries, now()) {
		r := CheckResult{ID: e.ID, Plan: e.Plan, Outcome: ledger.Open}
		cmdline := e.MetricCmd
		if cmdline == "" {
			r.Error = "no metric_cmd: settle it by hand with orch ledger settle"
			out = append(out, r)
			continue
		}
		v, why := gates.Measure(root, cmdline, nil)
		err := WithGitLock(root, func() error {
			if err := ledgerAppendOnly(ctx, repo, root); err != nil {
				return err
			}
			var msg string
			if v == nil {
				if _, err := ledger.RecordCheckFailure(root, e.ID, why, now()); err != nil {
					return err
				}
				r.Error = why
				msg = fmt.Sprintf("ledger #%d check: not measured (%s)\n", e.ID, why)
			} else {
				outcome, jerr := e.Judge(*v)
				if jerr != nil {
					// A bet without target or direction cannot be judged:
					// say so, keep it open, go on with the others.
					why := jerr.Error()
					if _, err := ledger.RecordCheckFailure(root, e.ID, why, now()); err != nil {
						return err
					}
					r.Error = why
					_, err := repo.Commit(ctx, fmt.Sprintf("ledger #%d check: not judged (%s)\n", e.ID, why), ledger.File)
					return err
				}
				if _, err := ledger.Settle(root, e.ID, *v, outcome, now()); err != nil {
					return err
				}
				r.Measured, r.Outcome = v, outcome
				msg = fmt.Sprintf("ledger #%d checked: %s (measured %g, target %g, %s is better)\n", e.ID, outcome, *v, *e.Target, e.Direction)
			}
			_, err := repo.Commit(ctx, msg, ledger.File)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("check #%d: %w", e.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}
