// Package verify runs adversarial verification: a harvested plan's claims
// (the numbered list under "## Claims" in its RESULT.md) go to a worker
// other than the author, in a verification plan with a neutral brief
// (plans.Brief). With 3 rounds, round 2 tries to refute round 1 and round
// 3 confirms what survived, each by a worker other than the author (and
// other than the earlier verifiers when the fleet allows). A plan is
// verified only when every claim is confirmed in every round; the first
// round with a claim not confirmed ends it refuted, with that verifier's
// evidence.
//
// The lead loop calls it with the record (internal/state) while it
// handles an event: Start when a plan is harvested or orch verify asks,
// Verdicts when a round's plan is harvested, Failed when a round's plan
// failed. Each changes the record in memory and commits what it writes
// (the round's PLAN.md, VERIFICATION.md); the loop saves, publishes the
// callback it returns and frees workers.
package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// Rounds runs verification rounds in the repo at Root.
type Rounds struct {
	Root      string
	Repo      *git.Repo
	Harvester *harvest.Harvester // commits (under orch's git lock) and ledger entries
	Log       *slog.Logger
	Now       func() time.Time
}

// Start puts p's claims to the first round of a new run of rounds
// (ledgered: p has its ledger entry already). A RESULT.md without claims
// fails p, with the callback saying why.
func (r *Rounds) Start(ctx context.Context, st *state.State, p *state.Run, rounds int, ledgered bool) (*event.Callback, error) {
	if rounds != 1 && rounds != 3 {
		return nil, fmt.Errorf("verify %s: %w, not %d", p.Name, ErrRounds, rounds)
	}
	// The claims are read from the harvest commit, not the work tree, which
	// the worker (or anyone) may have changed since.
	var result []byte
	var err error
	if p.Result != "" {
		result, err = r.Repo.Show(ctx, p.Result, plans.RelResultPath(p.Name))
	} else {
		result, err = plans.ReadResult(r.Root, p.Name, harvest.MaxResult)
	}
	var claims []string
	if err == nil {
		claims, err = plans.Claims(result)
	}
	now := r.Now().UTC()
	if err != nil {
		p.State, p.Reason, p.Updated = state.PlanFailed, "cannot verify: "+err.Error(), now
		return event.NewCallback(event.CallbackFailed, "verify-"+p.DoneEvent, p.Name, p.Worker, p.Reason, p.Result), nil
	}
	run := 1
	if p.Verification != nil {
		run = p.Verification.Run + 1
	}
	// Never reuse a round's plan of an earlier run, whatever the record says.
	for {
		if _, err := os.Lstat(filepath.Join(r.Root, plans.Dir, plans.RoundName(p.Name, run, 1))); err != nil {
			break
		}
		run++
	}
	p.Verification = &plans.Verification{Rounds: rounds, Round: 1, Run: run, Author: p.Worker, Claims: claims, Ledgered: ledgered,
		AuthorAgent: agentOf(st, p), VerifyWith: harvest.Def(r.Root, p).VerifyWith}
	p.State, p.Updated = state.PlanVerifying, now
	return nil, r.queueRound(ctx, st, p)
}

// queueRound writes, commits and queues the verification plan of p's
// current round. Writing is idempotent: a redelivered event finds the
// plan already there.
func (r *Rounds) queueRound(ctx context.Context, st *state.State, p *state.Run) error {
	v := p.Verification
	name := plans.RoundName(p.Name, v.Run, v.Round)
	if err := r.Harvester.OnBranch(ctx); err != nil {
		return fmt.Errorf("verify %s: %w", p.Name, err)
	}
	agents, otherThan, whom := route(v)
	if _, err := plans.Load(r.Root, name); errors.Is(err, plans.ErrNoPlan) {
		if err := plans.Write(r.Root, &plans.Plan{Name: name, Priority: 10, Agent: agents, Body: plans.Brief(p.Name, p.Verification, name)}); err != nil {
			return fmt.Errorf("verify %s: %w", p.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("verify %s: %w", p.Name, err)
	}
	if err := r.Harvester.Commit(ctx, fmt.Sprintf("verify %s: round %d of %d\n", p.Name, v.Round, v.Rounds), plans.RelPlanPath(name)); err != nil {
		return fmt.Errorf("verify %s: %w", p.Name, err)
	}
	now := r.Now().UTC()
	var earlier []string
	for _, row := range v.Matrix {
		if !slices.Contains(earlier, row.Verifier) {
			earlier = append(earlier, row.Verifier)
		}
	}
	st.Plans[name] = &state.Run{Name: name, State: state.PlanQueued, Queued: now, AttemptSince: now, Updated: now,
		VerifyOf: p.Name, Round: v.Round, Exclude: []string{v.Author}, Avoid: earlier, OtherThan: otherThan}
	p.Verifier, p.Reason = "", fmt.Sprintf("verification round %d of %d: %s queued for a worker other than %s%s", v.Round, v.Rounds, name, v.Author, whom)
	r.Log.Info("verification round queued", "plan", p.Name, "round", v.Round, "of", v.Rounds, "verification_plan", name)
	return nil
}

// Verdicts finishes the harvested verification plan vp (done; the caller
// frees its worker): its verdicts are read strictly, the matrix grows, and
// the parent goes to its next round or is decided.
func (r *Rounds) Verdicts(ctx context.Context, st *state.State, vp *state.Run) (*event.Callback, error) {
	parent := st.Plans[vp.VerifyOf]
	vp.State, vp.Updated = state.PlanDone, r.Now().UTC()
	if parent == nil || parent.Verification == nil || parent.State != state.PlanVerifying || parent.Verification.Round != vp.Round ||
		plans.RoundName(parent.Name, parent.Verification.Run, vp.Round) != vp.Name {
		return nil, nil // an old round of a verification that has moved on
	}
	v := parent.Verification
	result, err := plans.ReadResult(r.Root, vp.Name, harvest.MaxResult)
	var got []plans.Verdict
	if err == nil {
		got, err = plans.Verdicts(result, len(v.Claims))
	}
	if err != nil {
		v.Outcome = string(state.PlanFailed)
		parent.State, parent.Reason, parent.Updated = state.PlanFailed, fmt.Sprintf("verification round %d by %s: %v", vp.Round, vp.Worker, err), r.Now().UTC()
		if err := r.commitMatrix(ctx, parent); err != nil {
			return nil, err
		}
		return event.NewCallback(event.CallbackFailed, vp.DoneEvent, parent.Name, vp.Worker, parent.Reason, ""), nil
	}
	if g := v.Record(vp.Round, vp.Worker, agentOf(st, vp), got); g != nil {
		v.Outcome = string(state.PlanRefuted)
		if err := r.ledgerVerdict(ctx, parent, vp); err != nil {
			return nil, err
		}
		parent.State, parent.Reason, parent.Updated = state.PlanRefuted,
			fmt.Sprintf("claim %d %s by %s in round %d: %s", g.Claim, strings.ToLower(g.Verdict), vp.Worker, vp.Round, g.Evidence), r.Now().UTC()
		if err := r.commitMatrix(ctx, parent); err != nil {
			return nil, err
		}
		r.Log.Warn("refuted", "plan", parent.Name, "claim", g.Claim, "verifier", vp.Worker, "verdict", g.Verdict)
		return event.NewCallback(event.CallbackRefuted, vp.DoneEvent, parent.Name, vp.Worker, fmt.Sprintf("claim %d (%s)", g.Claim, vp.Worker), parent.Result), nil
	}
	if v.Round < v.Rounds {
		v.Round++
		return nil, r.queueRound(ctx, st, parent)
	}
	v.Outcome = string(state.PlanVerified)
	if err := r.ledgerVerdict(ctx, parent, vp); err != nil {
		return nil, err
	}
	parent.State, parent.Reason, parent.Updated = state.PlanVerified, "", r.Now().UTC()
	if err := r.commitMatrix(ctx, parent); err != nil {
		return nil, err
	}
	r.Log.Info("verified", "plan", parent.Name, "rounds", v.Rounds)
	return event.NewCallback(event.CallbackVerified, vp.DoneEvent, parent.Name, vp.Worker, "", parent.Result), nil
}

// ledgerVerdict records how the verification of parent ended (its
// Outcome, decided by round vp): as a fact about its ledger entry when it
// has one (orch verify of a plan already done), else, verified, in the
// entry made now. A refuted plan gets no entry (its VERIFICATION.md
// commit records the verdict).
func (r *Rounds) ledgerVerdict(ctx context.Context, parent, vp *state.Run) error {
	v := parent.Verification
	switch {
	case v.Ledgered:
		return r.Harvester.Fact(ctx, ledger.Fact{Type: ledger.FactVerdict, ID: parent.Ledger, Plan: parent.Name, Event: vp.DoneEvent, Status: v.Outcome, Time: r.Now()})
	case v.Outcome != string(state.PlanVerified):
		return nil
	}
	got, err := r.Harvester.Ledger(ctx, []ledger.Entry{harvest.Entry(parent, harvest.Def(r.Root, parent))})
	if err != nil {
		return err
	}
	v.Ledgered, parent.Ledger, parent.LedgeredAttempt = true, got[0].ID, parent.Attempts
	return nil
}

// commitMatrix writes VERIFICATION.md in the plan folder and commits it.
func (r *Rounds) commitMatrix(ctx context.Context, p *state.Run) error {
	rel := filepath.ToSlash(filepath.Join(plans.Dir, p.Name, plans.VerificationFile))
	if err := os.WriteFile(filepath.Join(r.Root, rel), []byte(plans.RenderMatrix(p.Name, p.Verification)), 0o644); err != nil {
		return err
	}
	return r.Harvester.Commit(ctx, fmt.Sprintf("verification %s: %s\n", p.Name, p.Verification.Outcome), rel)
}

// Failed settles the parent of a verification plan vp that ended failed
// (no RESULT.md, its workers lost, never acknowledged): the parent fails
// too, with the reason, instead of waiting in verifying for ever. It
// returns the callback for the lead: cb for a plan that verifies nothing,
// else one that names the parent.
func Failed(st *state.State, vp *state.Run, cb *event.Callback, now time.Time) *event.Callback {
	parent := st.Plans[vp.VerifyOf]
	if vp.VerifyOf == "" || parent == nil || parent.State != state.PlanVerifying || parent.Verification == nil ||
		plans.RoundName(parent.Name, parent.Verification.Run, vp.Round) != vp.Name {
		return cb
	}
	parent.Verification.Outcome = string(state.PlanFailed)
	parent.State, parent.Reason, parent.Updated = state.PlanFailed, fmt.Sprintf("verification round %d (%s) failed: %s", vp.Round, vp.Name, vp.Reason), now.UTC()
	id := "vf-" + vp.Name
	if cb != nil {
		id = cb.Event
	}
	return event.NewCallback(event.CallbackFailed, id, parent.Name, vp.Worker, parent.Reason, "")
}
