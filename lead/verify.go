package lead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// Adversarial verification: a harvested plan's claims (the numbered list
// under "## Claims" in its RESULT.md) go to a different worker than the
// author, in a verification plan with a neutral brief. With 3 rounds, round
// 2 tries to refute round 1 and round 3 confirms what survived, each by a
// worker other than the author (and other than the earlier verifiers when
// the fleet allows). A plan is verified only when every claim is confirmed
// in every round; the first round with a claim not confirmed ends it
// refuted, with that verifier's evidence.

// startVerification puts a harvested plan's claims to the first round.
func (l *Loop) startVerification(ctx context.Context, p *state.Run, rounds int, ledgered bool) (*event.Callback, error) {
	if rounds != 1 && rounds != 3 {
		return nil, fmt.Errorf("verify %s: rounds must be 1 or 3, not %d", p.Name, rounds)
	}
	// The claims are read from the harvest commit, not the work tree, which
	// the worker (or anyone) may have changed since.
	var result []byte
	var err error
	if p.Result != "" {
		result, err = l.repo.Show(ctx, p.Result, plans.RelResultPath(p.Name))
	} else {
		result, err = plans.ReadResult(l.cfg.Root, p.Name, harvest.MaxResult)
	}
	var claims []string
	if err == nil {
		claims, err = plans.Claims(result)
	}
	now := l.cfg.Now().UTC()
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
		if _, err := os.Lstat(filepath.Join(l.cfg.Root, plans.Dir, plans.RoundName(p.Name, run, 1))); err != nil {
			break
		}
		run++
	}
	p.Verification = &plans.Verification{Rounds: rounds, Round: 1, Run: run, Author: p.Worker, Claims: claims, Ledgered: ledgered}
	p.State, p.Updated = state.PlanVerifying, now
	return nil, l.queueRound(ctx, p)
}

// queueRound writes, commits and queues the verification plan of p's
// current round. Writing is idempotent: a redelivered event finds the
// plan already there.
func (l *Loop) queueRound(ctx context.Context, p *state.Run) error {
	v := p.Verification
	name := plans.RoundName(p.Name, v.Run, v.Round)
	if _, err := plans.Load(l.cfg.Root, name); errors.Is(err, plans.ErrNoPlan) {
		if err := plans.Write(l.cfg.Root, &plans.Plan{Name: name, Priority: 10, Body: plans.Brief(p.Name, p.Verification, name)}); err != nil {
			return fmt.Errorf("verify %s: %w", p.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("verify %s: %w", p.Name, err)
	}
	err := l.withGitLock(func() error {
		_, err := l.repo.Commit(ctx, fmt.Sprintf("verify %s: round %d of %d\n", p.Name, v.Round, v.Rounds), plans.RelPlanPath(name))
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("verify %s: %w", p.Name, err)
	}
	now := l.cfg.Now().UTC()
	var earlier []string
	for _, r := range v.Matrix {
		if !slices.Contains(earlier, r.Verifier) {
			earlier = append(earlier, r.Verifier)
		}
	}
	l.st.Plans[name] = &state.Run{Name: name, State: state.PlanQueued, Queued: now, AttemptSince: now, Updated: now,
		VerifyOf: p.Name, Round: v.Round, Exclude: []string{v.Author}, Avoid: earlier}
	p.Verifier, p.Reason = "", fmt.Sprintf("verification round %d of %d: %s queued for a worker other than %s", v.Round, v.Rounds, name, v.Author)
	l.log.Info("verification round queued", "plan", p.Name, "round", v.Round, "of", v.Rounds, "verification_plan", name)
	return nil
}

// verdicts finishes a verification plan: its verdicts are read strictly,
// the matrix grows, and the parent goes to its next round or is decided.
func (l *Loop) verdicts(ctx context.Context, vp *state.Run, w *state.Worker) (*event.Callback, error) {
	parent := l.st.Plans[vp.VerifyOf]
	vp.State, vp.Updated = state.PlanDone, l.cfg.Now().UTC()
	l.free(w)
	if parent == nil || parent.Verification == nil || parent.State != state.PlanVerifying || parent.Verification.Round != vp.Round ||
		plans.RoundName(parent.Name, parent.Verification.Run, vp.Round) != vp.Name {
		return nil, nil // an old round of a verification that has moved on
	}
	v := parent.Verification
	result, err := plans.ReadResult(l.cfg.Root, vp.Name, harvest.MaxResult)
	var got []plans.Verdict
	if err == nil {
		got, err = plans.Verdicts(result, len(v.Claims))
	}
	if err != nil {
		v.Outcome = string(state.PlanFailed)
		parent.State, parent.Reason, parent.Updated = state.PlanFailed, fmt.Sprintf("verification round %d by %s: %v", vp.Round, vp.Worker, err), l.cfg.Now().UTC()
		if err := l.commitMatrix(ctx, parent); err != nil {
			return nil, err
		}
		return event.NewCallback(event.CallbackFailed, vp.DoneEvent, parent.Name, vp.Worker, parent.Reason, ""), nil
	}
	if g := v.Record(vp.Round, vp.Worker, got); g != nil {
		v.Outcome = string(state.PlanRefuted)
		parent.State, parent.Reason, parent.Updated = state.PlanRefuted,
			fmt.Sprintf("claim %d %s by %s in round %d: %s", g.Claim, strings.ToLower(g.Verdict), vp.Worker, vp.Round, g.Evidence), l.cfg.Now().UTC()
		if err := l.commitMatrix(ctx, parent); err != nil {
			return nil, err
		}
		l.log.Warn("refuted", "plan", parent.Name, "claim", g.Claim, "verifier", vp.Worker, "verdict", g.Verdict)
		return event.NewCallback(event.CallbackRefuted, vp.DoneEvent, parent.Name, vp.Worker, fmt.Sprintf("claim %d (%s)", g.Claim, vp.Worker), parent.Result), nil
	}
	if v.Round < v.Rounds {
		v.Round++
		return nil, l.queueRound(ctx, parent)
	}
	if !v.Ledgered {
		got, err := l.harvester.Ledger(ctx, []ledger.Entry{harvest.Entry(parent, l.def(parent))})
		if err != nil {
			return nil, err
		}
		v.Ledgered, parent.Ledger = true, got[0].ID
	}
	v.Outcome = string(state.PlanVerified)
	parent.State, parent.Reason, parent.Updated = state.PlanVerified, "", l.cfg.Now().UTC()
	if err := l.commitMatrix(ctx, parent); err != nil {
		return nil, err
	}
	l.log.Info("verified", "plan", parent.Name, "rounds", v.Rounds)
	return event.NewCallback(event.CallbackVerified, vp.DoneEvent, parent.Name, vp.Worker, "", parent.Result), nil
}

// commitMatrix writes VERIFICATION.md in the plan folder and commits it.
func (l *Loop) commitMatrix(ctx context.Context, p *state.Run) error {
	rel := filepath.ToSlash(filepath.Join(plans.Dir, p.Name, plans.VerificationFile))
	if err := os.WriteFile(filepath.Join(l.cfg.Root, rel), []byte(plans.RenderMatrix(p.Name, p.Verification)), 0o644); err != nil {
		return err
	}
	return l.withGitLock(func() error {
		_, err := l.repo.Commit(ctx, fmt.Sprintf("verification %s: %s\n", p.Name, p.Verification.Outcome), rel)
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil
		}
		return err
	})
}

// verifyCmd handles orch verify: a plan that is done (or was verified or
// refuted before) is put to verification again.
func (l *Loop) verifyCmd(ctx context.Context, e event.Event) (*event.Callback, note, error) {
	p := l.st.Plans[e.Plan]
	if p == nil || (p.State != state.PlanDone && p.State != state.PlanVerified && p.State != state.PlanRefuted) {
		ps := state.PlanDraft
		if p != nil {
			ps = p.State
		}
		return nil, l.refuse(e, fmt.Sprintf("plan %s is %s: only a harvested plan (done, verified, refuted) can be verified", e.Plan, ps)), nil
	}
	if p.VerifyOf != "" {
		return nil, l.refuse(e, "plan "+e.Plan+" is itself a verification"), nil
	}
	rounds := 1
	if e.Status == "3" {
		rounds = 3
	}
	cb, err := l.startVerification(ctx, p, rounds, p.Ledger != 0)
	if err != nil {
		return nil, note{}, err
	}
	return cb, noted(fmt.Sprintf("verification (%d rounds) started", rounds)), nil
}

// verificationFailed settles the parent of a verification plan that ended
// failed (no RESULT.md, its workers lost, never acknowledged): the parent
// fails too, with the reason, instead of waiting in verifying for ever. The
// callback the lead gets names the parent.
func (l *Loop) verificationFailed(vp *state.Run, cb *event.Callback) *event.Callback {
	parent := l.st.Plans[vp.VerifyOf]
	if vp.VerifyOf == "" || parent == nil || parent.State != state.PlanVerifying || parent.Verification == nil ||
		plans.RoundName(parent.Name, parent.Verification.Run, vp.Round) != vp.Name {
		return cb
	}
	parent.Verification.Outcome = string(state.PlanFailed)
	parent.State, parent.Reason, parent.Updated = state.PlanFailed, fmt.Sprintf("verification round %d (%s) failed: %s", vp.Round, vp.Name, vp.Reason), l.cfg.Now().UTC()
	id := "vf-" + vp.Name
	if cb != nil {
		id = cb.Event
	}
	return event.NewCallback(event.CallbackFailed, id, parent.Name, vp.Worker, parent.Reason, "")
}
