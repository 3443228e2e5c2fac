// Package harvest commits what workers report done, for a batch of done
// events at once; a single event is a batch of one.
//
// A harvest has two commits on the base branch. Results takes each
// worker's work (in worktree isolation: everything left in its worktree,
// committed on the plan's branch, and its RESULT.md copied into the repo)
// and commits every RESULT.md of the batch in one commit. Ledger appends
// the batch's ledger entries (built by Entry) and commits LEDGER.jsonl
// once. A plan with acceptance gates or a verification gets its ledger
// entry later, when those end, through the same Ledger call.
//
// Every commit names the events it carries in trailers (TrailerEvent,
// TrailerLedger), and the ledger knows its entries' events, so a step that
// was done before a crash is found done when the event comes again: the
// redelivery commits nothing twice. Message is the one place a harvest's
// commit message is written.
package harvest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// MaxResult bounds the RESULT.md a harvest reads.
const MaxResult = 1 << 20

// TrailerEvent is the commit trailer naming the event a harvest (or gates)
// commit came from; TrailerLedger names the event of a ledger commit. They
// differ so that looking up an event's harvest never finds its ledger entry.
const (
	TrailerEvent  = "Orch-Event"
	TrailerLedger = "Orch-Ledger-Event"
)

// TrailerDepth is how far back the check for an earlier commit looks: a
// crash leaves it at most a few commits behind HEAD, and looking no further
// keeps the check's cost flat however long the history grows.
const TrailerDepth = 200

// Config is what a Harvester works on.
type Config struct {
	Root string    // the repo root, where RESULT.md and the ledger are committed
	Repo *git.Repo // the repo at Root
	Log  *slog.Logger
	// Branch is the branch orch serve started on: every commit is refused
	// (ErrBranchMoved) while the repo is on another one. "": no check.
	Branch string
	// Fault is the fault-injection hook (tests): called at the named points
	// between steps. Nil: none.
	Fault func(point string)
}

// Harvester commits harvests. Its methods take the repo's git lock, which
// serialises orch's own commits across processes.
type Harvester struct {
	cfg   Config
	mu    sync.Mutex
	trees map[string]*git.Repo // worktrees by folder, each asked for its identity once
	// ledger is LEDGER.jsonl as this harvester last committed it (known
	// says it has been read): a ledger that still starts with it has only
	// lines appended since, with no need to ask git.
	ledger      []byte
	ledgerKnown bool
}

// New returns a Harvester for cfg.
func New(cfg Config) *Harvester {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Fault == nil {
		cfg.Fault = func(string) {}
	}
	return &Harvester{cfg: cfg, trees: map[string]*git.Repo{}}
}

// tree is the repo at a worker's worktree.
func (h *Harvester) tree(dir string) *git.Repo {
	h.mu.Lock()
	defer h.mu.Unlock()
	wt := h.trees[dir]
	if wt == nil {
		wt = h.cfg.Repo.At(dir)
		h.trees[dir] = wt
	}
	return wt
}

// Item is one done event of a batch.
type Item struct {
	Event event.Event // the worker's done event
	// Dir is where the worker worked: its worktree (worktree isolation),
	// or Root (or empty) in shared isolation.
	Dir string
}

// Collected is an item's work, collected: its RESULT.md as harvested, or
// the problem that keeps it from being harvested at all (the plan fails;
// a redelivery would find the same).
type Collected struct {
	Result  []byte
	Problem string
	// Tidy: the worktree was on the plan's branch with everything in it
	// committed (now, or by the worker) when Collect looked.
	Tidy bool
}

// Collect is the worktree half of a harvest: in worktree isolation,
// everything the worker left is committed on the plan's branch (skip: the
// .worktreeinclude paths, never committed) and its RESULT.md copied into
// the repo. It returns the RESULT.md the harvest commits, read once.
// Doing it twice changes nothing. An error is git failing: try again later.
func (h *Harvester) Collect(ctx context.Context, it Item, skip []string) (Collected, error) {
	e := it.Event
	tidy := false
	if it.Dir != "" && it.Dir != h.cfg.Root { // worktree isolation
		wt := h.tree(it.Dir)
		// One git process says the branch and whether there is anything
		// to commit (a worker that changed nothing costs no more).
		branch, clean, err := wt.Status(ctx)
		if err != nil {
			return Collected{}, fmt.Errorf("collect %s: %w", e.Plan, err)
		}
		tidy = branch == fleet.PlanBranch(e.Plan)
		if tidy && !clean {
			if _, err := wt.CommitAll(ctx, Message(e.Plan+": "+SubjectLine(e.Status), []event.Event{e}, TrailerEvent), skip...); err != nil {
				return Collected{}, fmt.Errorf("collect %s: %w", e.Plan, err)
			}
		}
		data, err := plans.ReadResult(it.Dir, e.Plan, MaxResult)
		if err == nil {
			if err := fleet.WriteIn(h.cfg.Root, plans.RelResultPath(e.Plan), data, 0o644); err != nil {
				return Collected{}, fmt.Errorf("collect %s: %w", e.Plan, err)
			}
			return Collected{Result: data, Tidy: tidy}, nil
		}
		if !errors.Is(err, plans.ErrNoResult) {
			// There, but not usable (too large, a symlink): that is the
			// problem, whatever the repo holds.
			return Collected{Problem: fmt.Sprintf("reported done (%s) but %s", e.Status, ResultProblem(e.Plan, err)), Tidy: tidy}, nil
		}
		// No RESULT.md in the worktree: the repo's copy (an earlier
		// harvest's) says what is wrong, below.
	}
	data, err := plans.ReadResult(h.cfg.Root, e.Plan, MaxResult)
	if err != nil {
		return Collected{Problem: fmt.Sprintf("reported done (%s) but %s", e.Status, ResultProblem(e.Plan, err)), Tidy: tidy}, nil
	}
	return Collected{Result: data, Tidy: tidy}, nil
}

// ResultProblem says what is wrong with a plan's RESULT.md, from the error
// plans.ReadResult gave.
func ResultProblem(name string, err error) string {
	switch {
	case errors.Is(err, plans.ErrNoResult):
		return plans.RelResultPath(name) + " is missing"
	case errors.Is(err, plans.ErrTooLarge):
		return plans.RelResultPath(name) + " is too large (limit 1 MiB)"
	case errors.Is(err, plans.ErrSymlink):
		return plans.RelResultPath(name) + " is a symlink"
	}
	return plans.RelResultPath(name) + " could not be read: " + err.Error()
}

// Results commits the RESULT.md of every event in one commit on the base
// branch and returns, by event id, the commit that holds each: one made
// now, one made for it before a crash (found by its trailer), or, for a
// RESULT.md already committed as it is (an agent that commits its own
// work), the last commit that touched it.
func (h *Harvester) Results(ctx context.Context, events []event.Event) (map[string]string, error) {
	shas := map[string]string{}
	err := h.locked(ctx, func() error {
		done, err := h.cfg.Repo.RecentTrailers(ctx, TrailerEvent, TrailerDepth)
		if err != nil {
			return err
		}
		var todo []event.Event
		for _, e := range events {
			if sha := done[e.ID]; sha != "" {
				shas[e.ID] = sha
			} else {
				todo = append(todo, e)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		// Which RESULT.md files changed: with one, the commit itself tells
		// (nothing to commit), which saves a git process per plan.
		changed := map[string]bool{plans.RelResultPath(todo[0].Plan): true}
		if len(todo) > 1 {
			paths := make([]string, len(todo))
			for i, e := range todo {
				paths[i] = plans.RelResultPath(e.Plan)
			}
			if changed, err = h.cfg.Repo.Changed(ctx, paths...); err != nil {
				return err
			}
		}
		var in []event.Event
		var paths []string
		for _, e := range todo {
			if changed[plans.RelResultPath(e.Plan)] {
				in, paths = append(in, e), append(paths, plans.RelResultPath(e.Plan))
			} else if err := h.committedBefore(ctx, e, shas); err != nil {
				return err
			}
		}
		if len(in) == 0 {
			return nil
		}
		h.cfg.Fault("before-harvest-commit")
		sha, err := h.cfg.Repo.Commit(ctx, Message(harvestSubject(in), in, TrailerEvent), paths...)
		if errors.Is(err, git.ErrNothingToCommit) && len(in) == 1 {
			err = h.committedBefore(ctx, in[0], shas)
		} else if err == nil {
			for _, e := range in {
				shas[e.ID] = sha
			}
		}
		h.cfg.Fault("after-harvest-commit")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("harvest %s: %w", plansOf(events), err)
	}
	return shas, nil
}

// committedBefore records the last commit that touched e's RESULT.md: it
// is unchanged, so that commit has it as it is.
func (h *Harvester) committedBefore(ctx context.Context, e event.Event, shas map[string]string) error {
	log, err := h.cfg.Repo.Log(ctx, 1, plans.RelResultPath(e.Plan))
	if err != nil || len(log) == 0 {
		return fmt.Errorf("%w: %s is unchanged and no commit has it (%v)", ErrNoHarvest, plans.RelResultPath(e.Plan), err)
	}
	shas[e.ID] = log[0].SHA
	return nil
}

func harvestSubject(events []event.Event) string {
	if len(events) == 1 {
		return "harvest " + events[0].Plan + ": " + SubjectLine(events[0].Status)
	}
	return fmt.Sprintf("harvest %d plans: %s", len(events), SubjectLine(plansOf(events)))
}

func plansOf(events []event.Event) string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.Plan
	}
	return strings.Join(names, ", ")
}

// Entry is a harvested plan's ledger entry: what it claimed, its commit,
// and its bet (a bet with a metric command carries the lead loop's own
// measurements, never what the worker wrote).
func Entry(p *state.Run, def *state.Def) ledger.Entry {
	en := ledger.Entry{Plan: p.Name, Worker: p.Worker, Status: p.Status, Commit: p.Result, Time: p.DoneTime, Event: p.DoneEvent,
		Attempt: p.Attempts, Attempts: slices.Clone(p.History), DependsOn: def.DependsOn, VerifyOf: p.VerifyOf}
	for i := range en.Attempts {
		a := &en.Attempts[i]
		if a.N != p.Attempts || a.Worker != p.Worker {
			continue
		}
		// The harvested attempt: its profile, gates and usage are the
		// entry's. Still open on the record (its gates, its
		// verification), its work ended with the worker's done.
		en.Profile, en.Gates, en.Usage = a.Profile, a.Gates, a.Usage
		if a.End == nil {
			end := p.DoneTime.UTC()
			a.End, a.Outcome = &end, string(state.PlanDone)
		}
	}
	if v := p.Verification; v != nil && v.Outcome != "" {
		en.Verdict = v.Outcome
	}
	if b := def.Bet; b != nil {
		// Every field, whatever a plan written before bets were checked
		// as a whole left out: a bet never vanishes from the ledger.
		en.Metric, en.Baseline, en.Target, en.Direction, en.CheckBy = b.Metric, b.Baseline, b.Target, b.Direction, b.CheckBy
		if b.MetricCmd != "" {
			en.MetricCmd, en.Baseline, en.BaselineError = b.MetricCmd, p.Baseline, p.BaselineErr
			en.AtHarvest, en.AtHarvestError = p.AtHarvest, p.AtHarvestErr
		}
	}
	return en
}

// TrailerFact names the event a ledger fact (ledger.Fact) came from.
const TrailerFact = "Orch-Fact"

// Fact appends a later fact about a ledger entry (its usage, its verdict)
// and commits it, once: the same fact again writes and commits nothing.
func (h *Harvester) Fact(ctx context.Context, f ledger.Fact) error {
	return h.locked(ctx, func() error {
		data, err := ledger.Read(h.cfg.Root)
		if err != nil {
			return err
		}
		if err := h.appendOnly(ctx, data); err != nil {
			return err
		}
		if _, err := ledger.AddFact(h.cfg.Root, f); err != nil {
			return err
		}
		msg := fmt.Sprintf("ledger fact #%d: %s of %s\n\n%s: %s\n", f.ID, f.Type, f.Plan, TrailerFact, f.Event)
		_, err = h.cfg.Repo.Commit(ctx, msg, ledger.File)
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil // appended and committed before a crash
		}
		if err == nil {
			data, rerr := ledger.Read(h.cfg.Root)
			h.ledger, h.ledgerKnown = data, rerr == nil
		}
		return err
	})
}

// Ledger appends the entries (one read, one write) and commits the ledger
// once. An entry whose event is in the ledger already comes back as it was.
func (h *Harvester) Ledger(ctx context.Context, entries []ledger.Entry) ([]ledger.Entry, error) {
	var got []ledger.Entry
	err := h.locked(ctx, func() error {
		var err error
		if got, err = ledger.AppendAllChecked(h.cfg.Root, entries, func(data []byte) error { return h.appendOnly(ctx, data) }); err != nil {
			return err
		}
		subject := fmt.Sprintf("ledger: %d entries", len(got))
		if len(got) == 1 {
			subject = fmt.Sprintf("ledger #%d: %s (%s)", got[0].ID, got[0].Plan, SubjectLine(got[0].Status))
		}
		evs := make([]event.Event, len(got))
		for i, en := range got {
			evs[i] = event.Event{ID: en.Event}
		}
		_, err = h.cfg.Repo.Commit(ctx, Message(subject, evs, TrailerLedger), ledger.File)
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil // committed before a crash; the redelivery finds it done
		}
		h.cfg.Fault("after-ledger-commit")
		if err == nil {
			// Unread, it is asked of git next time.
			data, rerr := ledger.Read(h.cfg.Root)
			h.ledger, h.ledgerKnown = data, rerr == nil
		}
		return err
	})
	if err != nil {
		names := make([]string, len(entries))
		for i, en := range entries {
			names[i] = en.Plan
		}
		return nil, fmt.Errorf("ledger %s: %w", strings.Join(names, ", "), err)
	}
	return got, nil
}

// appendOnly refuses a ledger whose committed lines were changed by hand
// and not committed: orch's ledger commit would sweep the change in. Lines
// appended and not committed (orch's own, before a crash) are kept and
// committed with the next entry. git is asked only when the ledger does not
// start with what this harvester last committed (at the start, after a
// commit of someone else's).
func (h *Harvester) appendOnly(ctx context.Context, data []byte) error {
	if h.ledgerKnown && bytes.HasPrefix(data, h.ledger) {
		return nil
	}
	committed, _, err := h.cfg.Repo.ShowCommitted(ctx, "HEAD", ledger.File)
	if err != nil {
		return fmt.Errorf("ledger: what HEAD holds: %w", err)
	}
	if err := ledger.CheckAppendOnly(committed, data); err != nil {
		return fmt.Errorf("%w; nothing is appended (the event waits) until you commit the change (git commit %s) or undo it (git checkout -- %s)", err, ledger.File, ledger.File)
	}
	h.ledger, h.ledgerKnown = committed, true
	return nil
}

// Message is a commit message of orch's: the subject, then (for one event)
// the worker, and one trailer per event carried.
func Message(subject string, events []event.Event, trailer string) string {
	var b strings.Builder
	b.WriteString(subject)
	b.WriteString("\n\n")
	if len(events) == 1 && events[0].Worker != "" {
		fmt.Fprintf(&b, "Worker: %s\n", events[0].Worker)
	}
	for _, e := range events {
		fmt.Fprintf(&b, "%s: %s\n", trailer, e.ID)
	}
	return b.String()
}

// SubjectLine is s on one line, cut to fit a commit subject.
func SubjectLine(s string) string {
	r := []rune(event.OneLine(s))
	if len(r) > 72 {
		return string(r[:69]) + "..."
	}
	return string(r)
}

// Committed returns the commit among the last TrailerDepth that carries
// event id's effect (a harvest or gates commit), or "".
func (h *Harvester) Committed(ctx context.Context, id string) (string, error) {
	done, err := h.cfg.Repo.RecentTrailers(ctx, TrailerEvent, TrailerDepth)
	if err != nil {
		return "", err
	}
	return done[id], nil
}

func (h *Harvester) locked(ctx context.Context, fn func() error) error {
	lk, err := flock.Exclusive(filepath.Join(orchdir.Of(h.cfg.Root), orchdir.GitLock))
	if err != nil {
		return err
	}
	defer lk.Unlock()
	if err := h.OnBranch(ctx); err != nil {
		return err
	}
	return fn()
}

// OnBranch says whether the repo is still on the branch orch serve started
// on (ErrBranchMoved if not). Commits made on another branch (or a
// detached HEAD) would be orphaned when the user switches back, and the
// ledger's numbers reused: nothing is committed, nor written into the
// work tree to be committed, until the branch is back. Every commit checks
// it; callers that write files first check it before they write.
func (h *Harvester) OnBranch(ctx context.Context) error {
	if h.cfg.Branch == "" {
		return nil
	}
	b, err := h.cfg.Repo.CurrentBranch(ctx)
	if err != nil {
		return err
	}
	if b != h.cfg.Branch {
		on := "a detached HEAD"
		if b != "" {
			on = "branch " + b
		}
		return fmt.Errorf("%w: the repo is on %s, not %s where orch serve started; nothing is committed (events wait) until you git switch %s, or restart orch serve on the branch you want", ErrBranchMoved, on, h.cfg.Branch, h.cfg.Branch)
	}
	return nil
}

// Commit commits paths with msg under orch's git lock: the lead's commits
// beside the harvests (a verification's plan and matrix). A commit with
// nothing new in it (a redelivered event's) is no error.
func (h *Harvester) Commit(ctx context.Context, msg string, paths ...string) error {
	return h.locked(ctx, func() error {
		_, err := h.cfg.Repo.Commit(ctx, msg, paths...)
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil
		}
		return err
	})
}

// Gates commits the evidence of a plan's acceptance gates (rel, written
// by package gates) next to its RESULT.md, once per gated event e: a
// redelivery finds the commit by its trailer. Evidence that could not be
// written is not committed (the verdict says why).
func (h *Harvester) Gates(ctx context.Context, e event.Event, rel string) error {
	return h.locked(ctx, func() error {
		if sha, err := h.Committed(ctx, e.ID); err != nil || sha != "" {
			return err
		}
		if _, err := os.Stat(filepath.Join(h.cfg.Root, filepath.FromSlash(rel))); err != nil {
			return nil
		}
		_, err := h.cfg.Repo.Commit(ctx, Message("gates "+e.Plan+": "+SubjectLine(e.Status), []event.Event{{ID: e.ID}}, TrailerEvent), rel)
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil
		}
		return err
	})
}

// Def is what run p was dispatched with; a record from before runs kept
// it gets its PLAN.md as it is now.
func Def(root string, p *state.Run) *state.Def {
	if p.Def != nil {
		return p.Def
	}
	if d, err := plans.Load(root, p.Name); err == nil {
		return state.DefOf(d)
	}
	return &state.Def{}
}
