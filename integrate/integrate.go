// Package integrate is orch integrate; it runs in the CLI process, and in
// orch serve off its loop when orch.yaml asks for integrate: auto (package
// lead runs Run on a goroutine of its own). Approved plans (done, or verified) are brought into the base
// branch (the branch checked out in the repo) one at a time, in dependency
// order. Each is merged (or rebased, per orch.yaml) in a scratch worktree at
// the base branch's current head, so the repo's own checkout is never left
// half-merged; its acceptance gates run again there, on the combined code;
// only then does the base branch move forward to it, by a fast-forward of
// the repo's checkout. The next plan starts from that new head, so every
// later branch is combined with everything integrated before it and tested
// again. A conflict stops that plan (state conflict, the files named) and
// the plans that depend on it; plan branches are never rewritten, deleted or
// force-pushed. Outcomes reach the lead loop as integrated records, through
// the stream (or the spool when orch serve is not running), so the plan
// states stay the loop's to record.
//
// How the pieces fit. Run checks the isolation and takes the integrate
// lock; approved picks the plans and integrationOrder sorts them by their
// dependencies. For each, integration.one combines the plan's branch with
// the base branch's head (combine: a scratch worktree under
// .orch/integrate, the merge or rebase, then the included files, orch.yaml's
// setup command and the plan's acceptance commands, run by package gates),
// advance fast-forwards the base branch under the git lock, and record
// sends the outcome to orch serve with orchctl.SendCommand (or, in orch
// serve, hands it to the loop: Options.Record).
package integrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// Integration outcomes.
const (
	Integrated     = "integrated"
	Conflict       = "conflict"
	Failed         = "failed"
	Skipped        = "skipped"
	WouldIntegrate = "would integrate"
	WouldConflict  = "would conflict"
)

// Options is what orch integrate was asked to do.
type Options struct {
	Plans       []string // empty: every approved plan
	DryRun      bool
	GateTimeout time.Duration
	Progress    io.Writer // one line per step as it happens; optional
	// Record tells the lead loop an outcome; nil sends it to orch serve
	// (orchctl.SendCommand). It says whether the record waits in the spool.
	Record func(event.Event) (spooled bool, err error)
	// WaitLock waits while another orch integrate runs, instead of
	// refusing (orch serve's own integrations, off its loop).
	WaitLock bool
}

// Step is what happened (or would happen) to one plan.
type Step struct {
	Plan    string   `json:"plan"`
	Branch  string   `json:"branch"`
	Base    string   `json:"base"` // the base branch
	Commits int      `json:"commits"`
	Outcome string   `json:"outcome"`
	Commit  string   `json:"commit,omitempty"` // the base branch's head after it
	Files   []string `json:"files,omitempty"`  // conflicting files
	Reason  string   `json:"reason,omitempty"`
	Spooled bool     `json:"spooled,omitempty"` // the record waits in the spool for orch serve
	Gates   bool     `json:"-"`                 // failed because its gates fail on the combined code
	// Moved: not integrated because the base branch kept moving while its
	// gates ran (harvest commits); a later run may go through.
	Moved bool `json:"-"`
}

// maxMoves bounds how often one plan is combined again because the base
// branch moved (a harvest commit) while its gates ran.
const maxMoves = 3

// Run brings approved plan branches into the base branch.
func Run(ctx context.Context, root string, o Options) ([]Step, error) {
	for _, n := range o.Plans {
		if err := plans.ValidateName(n); err != nil {
			return nil, err
		}
	}
	if o.GateTimeout <= 0 {
		o.GateTimeout = gates.DefaultGateTimeout
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	conf, err := config.Load(root)
	if err != nil {
		return nil, fmt.Errorf("integrate: %w", err)
	}
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return nil, fmt.Errorf("integrate: %w", err)
	}
	if iso := st.Isolation; iso == config.Shared || (iso == "" && conf.Isolation == config.Shared) {
		return nil, fmt.Errorf("integrate: %w", ErrShared)
	}
	repo, err := git.Open(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("integrate: %w", err)
	}
	base, err := repo.CurrentBranch(ctx)
	if err != nil {
		return nil, fmt.Errorf("integrate: %w", err)
	}
	if base == "" {
		return nil, fmt.Errorf("integrate: HEAD is detached in %s: check out the branch to integrate into (git switch main)", root)
	}
	if !o.DryRun && o.WaitLock {
		lk, err := flock.Exclusive(filepath.Join(orchdir.Of(root), orchdir.IntegrateLock))
		if err != nil {
			return nil, fmt.Errorf("integrate: %w", err)
		}
		defer lk.Unlock()
	} else if !o.DryRun {
		lk, pid, err := flock.TryExclusive(filepath.Join(orchdir.Of(root), orchdir.IntegrateLock))
		if errors.Is(err, flock.ErrHeld) {
			return nil, fmt.Errorf("integrate: another orch integrate runs (pid %d); wait for it", pid)
		}
		if err != nil {
			return nil, fmt.Errorf("integrate: %w", err)
		}
		defer lk.Unlock()
	}
	names, err := approved(st, o.Plans)
	if err != nil {
		return nil, fmt.Errorf("integrate: %w", err)
	}
	order, steps := integrationOrder(root, st, names)
	in := &integration{ctx: ctx, root: root, repo: repo, base: base, conf: conf, st: st, o: o}
	out := steps // plans that cannot go at all (a dependency is not there)
	for i := range out {
		out[i].Base = base
		fmt.Fprintln(o.Progress, out[i].Line())
	}
	failed := map[string]string{}
	tip, err := repo.RevParse(ctx, "refs/heads/"+base)
	if err != nil {
		return nil, fmt.Errorf("integrate: %w", err)
	}
	for _, name := range order {
		s := Step{Plan: name, Branch: fleet.PlanBranch(name), Base: base}
		if dep := blockedBy(root, name, failed); dep != "" {
			s.Outcome, s.Reason = Skipped, fmt.Sprintf("depends on %s, which was not integrated (%s)", dep, failed[dep])
			failed[name] = Skipped
		} else {
			s, tip = in.one(s, tip)
			if s.Outcome != Integrated && s.Outcome != WouldIntegrate {
				failed[name] = s.Outcome
			}
		}
		fmt.Fprintln(o.Progress, s.Line())
		out = append(out, s)
	}
	return out, nil
}

// Line is the step as orch integrate prints it.
func (s Step) Line() string {
	switch s.Outcome {
	case Integrated, WouldIntegrate:
		commits := fmt.Sprintf("%d commits", s.Commits)
		if s.Commits == 1 {
			commits = "1 commit"
		}
		line := fmt.Sprintf("%s %s: %s (%s) into %s at %s", strings.ToUpper(s.Outcome[:1])+s.Outcome[1:], s.Plan, s.Branch, commits, s.Base, git.Short(s.Commit))
		if s.Reason != "" {
			line += "; " + s.Reason
		}
		return line
	case Conflict, WouldConflict:
		return fmt.Sprintf("%s %s: %s with %s in %s", strings.ToUpper(s.Outcome[:1])+s.Outcome[1:], s.Plan, s.Branch, s.Base, strings.Join(s.Files, ", "))
	}
	return fmt.Sprintf("%s %s: %s", strings.ToUpper(s.Outcome[:1])+s.Outcome[1:], s.Plan, s.Reason)
}

// approved returns the plans to integrate: the named ones, each of which
// must be done, verified (or already integrated, or in conflict from an
// earlier try), or else every approved plan that is not a verification
// round.
func approved(st *state.State, named []string) ([]string, error) {
	ok := func(p *state.Run) bool {
		return p.State == state.PlanDone || p.State == state.PlanVerified || p.State == state.PlanConflict || p.State == state.PlanIntegrated || FailedOnIntegration(p)
	}
	if len(named) > 0 {
		for _, n := range named {
			p := st.Plans[n]
			if p == nil {
				return nil, fmt.Errorf("plan %s: %w: it was never dispatched", n, ErrNotApproved)
			}
			if p.VerifyOf != "" {
				return nil, fmt.Errorf("plan %s: %w: it is a verification round of %s, integrate that", n, ErrNotApproved, p.VerifyOf)
			}
			if p.State == state.PlanConflict && p.Unmerged != nil {
				return nil, fmt.Errorf("plan %s: %w: it never ran, %s", n, ErrNotApproved, p.Reason)
			}
			if !ok(p) {
				return nil, fmt.Errorf("plan %s: %w: it is %s; only done or verified plans are integrated", n, ErrNotApproved, p.State)
			}
		}
		return named, nil
	}
	var out []string
	for n, p := range st.Plans {
		if p.VerifyOf == "" && (p.State == state.PlanDone || p.State == state.PlanVerified || (p.State == state.PlanConflict && p.Unmerged == nil) || FailedOnIntegration(p)) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// FailedOnIntegration says whether a plan failed only at integration (its
// gates on the combined code): it is still approved, to be tried again.
func FailedOnIntegration(p *state.Run) bool {
	return p.State == state.PlanFailed && strings.HasPrefix(p.Reason, Reason)
}

// Reason starts the reason of a plan failed by orch integrate (the lead
// loop records it so).
const Reason = "integration: "

// integrationOrder sorts plans so that each comes after the plans it
// depends on (ties: by name). A plan whose dependency is neither
// integrated nor in the list cannot go: it is returned as a skipped step.
func integrationOrder(root string, st *state.State, names []string) ([]string, []Step) {
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	deps := map[string][]string{}
	var skipped []Step
	var ok []string
	for _, n := range names {
		d, err := plans.Load(root, n)
		if err != nil {
			skipped = append(skipped, Step{Plan: n, Branch: fleet.PlanBranch(n), Outcome: Skipped, Reason: err.Error()})
			continue
		}
		missing := ""
		for _, dep := range d.DependsOn {
			if in[dep] {
				deps[n] = append(deps[n], dep)
			} else if p := st.Plans[dep]; p == nil || p.State != state.PlanIntegrated {
				ps := "never dispatched"
				if p != nil {
					ps = string(p.State)
				}
				missing = fmt.Sprintf("depends on %s (%s), which is not integrated: integrate it first or name it too", dep, ps)
				break
			}
		}
		if missing != "" {
			skipped = append(skipped, Step{Plan: n, Branch: fleet.PlanBranch(n), Outcome: Skipped, Reason: missing})
			continue
		}
		ok = append(ok, n)
	}
	// Kahn's algorithm over the plans that can go; a plan whose dependency
	// was skipped above is skipped too.
	placed := map[string]bool{}
	var order []string
	for len(order) < len(ok) {
		progress := false
		for _, n := range ok {
			if placed[n] {
				continue
			}
			ready := true
			for _, d := range deps[n] {
				if !placed[d] {
					ready = false
				}
			}
			if ready {
				placed[n], progress = true, true
				order = append(order, n)
			}
		}
		if !progress {
			for _, n := range ok {
				if !placed[n] {
					skipped = append(skipped, Step{Plan: n, Branch: fleet.PlanBranch(n), Outcome: Skipped,
						Reason: "its dependencies are not all integrated (a cycle, or one that cannot go)"})
				}
			}
			break
		}
	}
	return order, skipped
}

// blockedBy names a dependency of plan that failed in this run, if any.
func blockedBy(root, name string, failed map[string]string) string {
	d, err := plans.Load(root, name)
	if err != nil {
		return ""
	}
	for _, dep := range d.DependsOn {
		if _, bad := failed[dep]; bad {
			return dep
		}
	}
	return ""
}

type integration struct {
	ctx  context.Context
	root string
	repo *git.Repo
	base string
	conf *config.Config
	st   *state.State
	o    Options
}

// one integrates (or, dry, predicts) one plan onto tip and returns the
// step and the base branch's head after it.
func (in *integration) one(s Step, tip string) (Step, string) {
	ctx := in.ctx
	branch, err := in.repo.RevParse(ctx, "refs/heads/"+s.Branch)
	if err != nil {
		s.Outcome, s.Reason = Skipped, fmt.Sprintf("no branch %s (was it run in shared isolation?)", s.Branch)
		return s, tip
	}
	if p := in.st.Plans[s.Plan]; p != nil && p.State == state.PlanIntegrated {
		// Recorded as in: never combined or tested again (with rebase, or
		// with commits added to its branch since, it is no ancestor).
		s.Outcome, s.Commit, s.Reason = Integrated, p.Merged, "already integrated"
		if in.o.DryRun {
			s.Outcome = WouldIntegrate
		}
		return s, tip
	}
	if s.Commits, err = in.repo.CountCommits(ctx, tip, branch); err != nil {
		s.Outcome, s.Reason = Failed, err.Error()
		return s, tip
	}
	if done, err := in.repo.IsAncestor(ctx, branch, tip); err == nil && done {
		// Already in (an earlier run, or a record the loop has not seen):
		// record it again, which changes nothing if it is known.
		s.Outcome, s.Commit = Integrated, tip
		if in.o.DryRun {
			s.Outcome = WouldIntegrate
			return s, tip
		}
		return in.record(s), tip
	}
	if in.o.DryRun {
		tree, err := in.repo.MergeTree(ctx, tip, branch)
		var ce *git.ConflictError
		switch {
		case errors.As(err, &ce):
			s.Outcome, s.Files = WouldConflict, ce.Files
			return s, tip
		case err != nil:
			s.Outcome, s.Reason = Failed, err.Error()
			return s, tip
		}
		next, err := in.repo.CommitTree(ctx, tree, "integrate "+s.Plan+" (dry run)", tip, branch)
		if err != nil {
			s.Outcome, s.Reason = Failed, err.Error()
			return s, tip
		}
		s.Outcome, s.Commit = WouldIntegrate, next
		if n := len(in.acceptance(s.Plan)); n > 0 {
			s.Reason = fmt.Sprintf("its %d acceptance gates would run on the merged code", n)
		}
		return s, next
	}
	for move := 0; ; move++ {
		next, step := in.combine(s, tip, branch)
		if step.Outcome == Conflict || step.Gates {
			return in.record(step), tip
		}
		if step.Outcome != "" {
			return step, tip // git failed in the scratch worktree: nothing changed, not recorded
		}
		// Move the base branch: under the git lock, so no harvest commit
		// lands in between, and only if nothing landed while the gates ran.
		moved, err := in.advance(tip, next)
		if err != nil {
			// Nothing moved and the plan is as it was: not recorded, so
			// running orch integrate again tries it again.
			s.Outcome, s.Reason = Failed, err.Error()
			return s, tip
		}
		if moved == "" {
			s.Outcome, s.Commit = Integrated, next
			return in.record(s), next
		}
		if move+1 >= maxMoves {
			s.Outcome, s.Reason, s.Moved = Failed, fmt.Sprintf("%s kept moving while the gates ran (%d tries); run orch integrate again", in.base, maxMoves), true
			return s, moved // not recorded: a retry may go through
		}
		tip = moved
	}
}

// combine merges (or rebases) the plan's branch onto tip in a scratch
// worktree and runs the plan's gates there. It returns the combined commit,
// or a step with the outcome when the plan cannot go.
func (in *integration) combine(s Step, tip, branch string) (string, Step) {
	ctx := in.ctx
	dir := filepath.Join(orchdir.Of(in.root), orchdir.Integrate, s.Plan)
	_ = in.repo.RemoveWorktree(ctx, dir) // one left by an interrupted run
	os.RemoveAll(dir)
	// A branch with merge commits (a conflict resolved by merging the base
	// into it) is merged: a rebase would drop the resolution.
	rebase := in.conf.Integrate == config.Rebase
	if rebase {
		if merges, err := in.repo.HasMerges(ctx, tip, branch); err != nil || merges {
			rebase = false
		}
	}
	start := tip
	if rebase {
		start = branch
	}
	if err := in.repo.AddWorktree(ctx, dir, start); err != nil {
		s.Outcome, s.Reason = Failed, err.Error()
		return "", s
	}
	defer in.repo.RemoveWorktree(context.WithoutCancel(ctx), dir)
	wt := in.repo.At(dir)
	var next string
	var err error
	if rebase {
		next, err = wt.Rebase(ctx, tip)
	} else {
		next, err = wt.Merge(ctx, branch, fmt.Sprintf("integrate %s\n\nOrch-Integrated: %s\n", s.Plan, s.Plan))
	}
	var ce *git.ConflictError
	switch {
	case errors.As(err, &ce):
		s.Outcome, s.Files = Conflict, ce.Files
		return "", s
	case err != nil:
		s.Outcome, s.Reason = Failed, err.Error()
		return "", s
	}
	cmds := in.acceptance(s.Plan)
	if len(cmds) > 0 {
		// The gates see what the worker's worktree had: the included files
		// and the setup command's work.
		if err := fleet.CopyIncludes(ctx, in.repo, dir); err != nil {
			s.Outcome, s.Reason = Failed, err.Error()
			return "", s
		}
		worker := ""
		if p := in.st.Plans[s.Plan]; p != nil {
			worker = p.Worker
		}
		if err := gates.Setup(in.conf, dir, s.Plan, worker, nil, nil); err != nil {
			s.Outcome, s.Reason = Failed, err.Error()
			return "", s
		}
	}
	for _, c := range cmds {
		r := gates.Run(dir, c, in.o.GateTimeout)
		if r.Failed() {
			s.Outcome, s.Reason, s.Gates = Failed, "acceptance gate fails on the combined code: "+r.Summary(), true
			return "", s
		}
	}
	return next, Step{}
}

// acceptance returns the plan's acceptance commands, as the lead loop
// enforced them (PLAN.md's for older records).
func (in *integration) acceptance(name string) []string {
	if p := in.st.Plans[name]; p != nil && p.Def != nil {
		return p.Def.Acceptance
	}
	if d, err := plans.Load(in.root, name); err == nil {
		return d.Acceptance
	}
	return nil
}

// advance fast-forwards the base branch in the repo's checkout from tip to
// next. If the branch is no longer at tip, nothing changes and its head is
// returned.
func (in *integration) advance(tip, next string) (string, error) {
	lk, err := flock.Exclusive(filepath.Join(orchdir.Of(in.root), orchdir.GitLock))
	if err != nil {
		return "", err
	}
	defer lk.Unlock()
	now, err := in.repo.RevParse(in.ctx, "refs/heads/"+in.base)
	if err != nil {
		return "", err
	}
	if now != tip {
		return now, nil
	}
	if cur, err := in.repo.CurrentBranch(in.ctx); err != nil || cur != in.base {
		return "", fmt.Errorf("the repo's checkout left %s while integrating (now %q): nothing moved", in.base, cur)
	}
	if err := in.repo.FastForward(in.ctx, next); err != nil {
		return "", fmt.Errorf("%w (local changes in the repo's checkout? commit or stash them, then run orch integrate again)", err)
	}
	return "", nil
}

// record tells the lead loop the outcome.
func (in *integration) record(s Step) Step {
	var status string
	switch s.Outcome {
	case Integrated:
		status = "integrated " + s.Commit
	case Conflict:
		status = "conflict: " + strings.Join(s.Files, ", ")
	default:
		status = "failed: " + s.Reason
	}
	e := event.New(event.Integrated, s.Plan, status, "", "")
	if in.o.Record != nil {
		spooled, err := in.o.Record(e)
		if err != nil {
			s.Reason = strings.TrimSpace(s.Reason + "; not recorded: " + err.Error())
		}
		s.Spooled = spooled
		return s
	}
	res, err := orchctl.SendCommand(in.root, e, 0)
	if err != nil {
		s.Reason = strings.TrimSpace(s.Reason + "; not recorded: " + err.Error())
	}
	s.Spooled = res.Spooled
	return s
}
