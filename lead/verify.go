package lead

import (
	"context"
	"fmt"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/verify"
)

// The loop's side of adversarial verification (package verify): orch
// verify's command, and the one call that settles a failed round's parent.

// verifyCmd handles orch verify: a plan that is done (or was verified or
// refuted before) is put to verification again.
func (l *Loop) verifyCmd(ctx context.Context, e event.Event) (*event.Callback, state.Note, error) {
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
	cb, err := l.rounds.Start(ctx, l.st, p, rounds, p.Ledger != 0)
	if err != nil {
		return nil, state.Note{}, err
	}
	return cb, state.Noted(fmt.Sprintf("verification (%d rounds) started", rounds)), nil
}

// verificationFailed settles the parent of a verification plan vp that
// ended failed (verify.Failed); the callback the lead gets names the
// parent.
func (l *Loop) verificationFailed(vp *state.Run, cb *event.Callback) *event.Callback {
	return verify.Failed(l.st, vp, cb, l.cfg.Now())
}
