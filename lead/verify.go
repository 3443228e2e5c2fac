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

// VerificationFile is the matrix committed in the plan folder.
const VerificationFile = "VERIFICATION.md"

// Verification is a plan's verification in progress or done.
type Verification struct {
	Rounds   int         `json:"rounds"`
	Round    int         `json:"round"`
	Run      int         `json:"run"` // how many times this plan has been put to verification
	Author   string      `json:"author"`
	Claims   []string    `json:"claims"`
	Matrix   []MatrixRow `json:"matrix"`
	Outcome  string      `json:"outcome,omitempty"` // verified, refuted, failed
	Ledgered bool        `json:"ledgered,omitempty"`
}

// MatrixRow is one cell of the verification matrix: a claim, in a round,
// judged by a verifier.
type MatrixRow struct {
	Claim    int    `json:"claim"`
	Text     string `json:"text"`
	Round    int    `json:"round"`
	Verifier string `json:"verifier"`
	Verdict  string `json:"verdict"`
	Evidence string `json:"evidence"`
}

// startVerification puts a harvested plan's claims to the first round.
func (l *Loop) startVerification(ctx context.Context, p *Plan, rounds int, ledgered bool) (*Callback, error) {
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
		result, err = plans.ReadResult(l.cfg.Root, p.Name, MaxResult)
	}
	var claims []string
	if err == nil {
		claims, err = plans.Claims(result)
	}
	now := l.cfg.Now().UTC()
	if err != nil {
		p.State, p.Reason, p.Updated = PlanFailed, "cannot verify: "+err.Error(), now
		return newCallback(CallbackFailed, "verify-"+p.DoneEvent, p.Name, p.Worker, p.Reason, p.Result), nil
	}
	run := 1
	if p.Verification != nil {
		run = p.Verification.Run + 1
	}
	// Never reuse a round's plan of an earlier run, whatever the record says.
	for {
		if _, err := os.Lstat(filepath.Join(l.cfg.Root, plans.Dir, roundName(p.Name, run, 1))); err != nil {
			break
		}
		run++
	}
	p.Verification = &Verification{Rounds: rounds, Round: 1, Run: run, Author: p.Worker, Claims: claims, Ledgered: ledgered}
	p.State, p.Updated = PlanVerifying, now
	return nil, l.queueRound(ctx, p)
}

// roundName is the verification plan of a round: <plan>.v<run>r<round>.
func roundName(parent string, run, round int) string {
	suffix := fmt.Sprintf(".v%dr%d", run, round)
	if len(parent)+len(suffix) > event.MaxPlanName {
		parent = strings.TrimRight(parent[:event.MaxPlanName-len(suffix)], ".-_")
	}
	return parent + suffix
}

// queueRound writes, commits and queues the verification plan of p's
// current round. Writing is idempotent: a redelivered event finds the
// plan already there.
func (l *Loop) queueRound(ctx context.Context, p *Plan) error {
	v := p.Verification
	name := roundName(p.Name, v.Run, v.Round)
	if _, err := plans.Load(l.cfg.Root, name); errors.Is(err, plans.ErrNoPlan) {
		if err := plans.Write(l.cfg.Root, &plans.Plan{Name: name, Priority: 10, Body: l.brief(p, name)}); err != nil {
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
	l.st.Plans[name] = &Plan{Name: name, State: PlanQueued, Queued: now, AttemptSince: now, Updated: now,
		VerifyOf: p.Name, Round: v.Round, Exclude: []string{v.Author}, Avoid: earlier}
	p.Verifier, p.Reason = "", fmt.Sprintf("verification round %d of %d: %s queued for a worker other than %s", v.Round, v.Rounds, name, v.Author)
	l.log.Info("verification round queued", "plan", p.Name, "round", v.Round, "of", v.Rounds, "verification_plan", name)
	return nil
}

// brief is the neutral task of a verification round: it asks whether each
// claim holds and never says what the answer should be.
func (l *Loop) brief(p *Plan, name string) string {
	v := p.Verification
	var b strings.Builder
	fmt.Fprintf(&b, "# Verify the claims of %s (round %d of %d)\n\n", p.Name, v.Round, v.Rounds)
	fmt.Fprintf(&b, "Another worker carried out %s and wrote %s.\n", plans.RelPlanPath(p.Name), plans.RelResultPath(p.Name))
	b.WriteString("Verify whether each claim below holds. Try to refute it. Run the commands yourself; do not take\n")
	b.WriteString("the result file's word for anything. Change no file except your own RESULT.md.\n\n## Claims\n")
	for i, c := range v.Claims {
		fmt.Fprintf(&b, "%d. %s\n", i+1, c)
	}
	if v.Round > 1 {
		b.WriteString("\n## Earlier verdicts\nA previous round concluded the following. A verdict is not evidence: check each claim again\n")
		b.WriteString("and try to refute it.\n")
		for _, r := range v.Matrix {
			fmt.Fprintf(&b, "- claim %d, round %d: %s (%s)\n", r.Claim, r.Round, r.Verdict, r.Evidence)
		}
	}
	fmt.Fprintf(&b, "\n## What to write\nWrite %s with a section \"## Verdicts\": one line per claim, in the form\n", plans.RelResultPath(name))
	b.WriteString("`N. VERDICT: evidence`, where VERDICT is CONFIRMED, REFUTED or UNVERIFIABLE and the evidence\n")
	b.WriteString("says what you ran and what it showed.\n")
	return b.String()
}

// verdicts finishes a verification plan: its verdicts are read strictly,
// the matrix grows, and the parent goes to its next round or is decided.
func (l *Loop) verdicts(ctx context.Context, vp *Plan, w *Worker) (*Callback, error) {
	parent := l.st.Plans[vp.VerifyOf]
	vp.State, vp.Updated = PlanDone, l.cfg.Now().UTC()
	l.free(w)
	if parent == nil || parent.Verification == nil || parent.State != PlanVerifying || parent.Verification.Round != vp.Round ||
		roundName(parent.Name, parent.Verification.Run, vp.Round) != vp.Name {
		return nil, nil // an old round of a verification that has moved on
	}
	v := parent.Verification
	result, err := plans.ReadResult(l.cfg.Root, vp.Name, MaxResult)
	var got []plans.Verdict
	if err == nil {
		got, err = plans.Verdicts(result, len(v.Claims))
	}
	if err != nil {
		v.Outcome = PlanFailed
		parent.State, parent.Reason, parent.Updated = PlanFailed, fmt.Sprintf("verification round %d by %s: %v", vp.Round, vp.Worker, err), l.cfg.Now().UTC()
		if err := l.commitMatrix(ctx, parent); err != nil {
			return nil, err
		}
		return newCallback(CallbackFailed, vp.DoneEvent, parent.Name, vp.Worker, parent.Reason, ""), nil
	}
	for _, g := range got {
		v.Matrix = append(v.Matrix, MatrixRow{Claim: g.Claim, Text: v.Claims[g.Claim-1], Round: vp.Round, Verifier: vp.Worker, Verdict: g.Verdict, Evidence: g.Evidence})
	}
	for _, g := range got {
		if g.Verdict != plans.Confirmed {
			v.Outcome = PlanRefuted
			parent.State, parent.Reason, parent.Updated = PlanRefuted,
				fmt.Sprintf("claim %d %s by %s in round %d: %s", g.Claim, strings.ToLower(g.Verdict), vp.Worker, vp.Round, g.Evidence), l.cfg.Now().UTC()
			if err := l.commitMatrix(ctx, parent); err != nil {
				return nil, err
			}
			l.log.Warn("refuted", "plan", parent.Name, "claim", g.Claim, "verifier", vp.Worker, "verdict", g.Verdict)
			cb := newCallback(CallbackRefuted, vp.DoneEvent, parent.Name, vp.Worker, fmt.Sprintf("claim %d (%s)", g.Claim, vp.Worker), parent.Result)
			return cb, nil
		}
	}
	if v.Round < v.Rounds {
		v.Round++
		return nil, l.queueRound(ctx, parent)
	}
	if !v.Ledgered {
		var entry ledger.Entry
		err := l.withGitLock(func() error {
			var err error
			entry, err = l.recordLedger(ctx, parent, l.def(parent))
			return err
		})
		if err != nil {
			return nil, err
		}
		v.Ledgered, parent.Ledger = true, entry.ID
	}
	v.Outcome = PlanVerified
	parent.State, parent.Reason, parent.Updated = PlanVerified, "", l.cfg.Now().UTC()
	if err := l.commitMatrix(ctx, parent); err != nil {
		return nil, err
	}
	l.log.Info("verified", "plan", parent.Name, "rounds", v.Rounds)
	return newCallback(CallbackVerified, vp.DoneEvent, parent.Name, vp.Worker, "", parent.Result), nil
}

// commitMatrix writes VERIFICATION.md in the plan folder and commits it.
func (l *Loop) commitMatrix(ctx context.Context, p *Plan) error {
	rel := filepath.ToSlash(filepath.Join(plans.Dir, p.Name, VerificationFile))
	if err := os.WriteFile(filepath.Join(l.cfg.Root, rel), []byte(RenderMatrix(p.Name, p.Verification)), 0o644); err != nil {
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

// RenderMatrix is the verification matrix as markdown: claim × round ×
// verifier × verdict × evidence.
func RenderMatrix(plan string, v *Verification) string {
	var b strings.Builder
	outcome := v.Outcome
	if outcome == "" {
		outcome = "in progress"
	}
	fmt.Fprintf(&b, "# Verification: %s\n\nAuthor: %s. Rounds: %d. Outcome: **%s**.\n\n", plan, v.Author, v.Rounds, outcome)
	b.WriteString("| claim | round | verifier | verdict | evidence |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	for _, r := range v.Matrix {
		fmt.Fprintf(&b, "| %d. %s | %d | %s | %s | %s |\n", r.Claim, cell(r.Text), r.Round, r.Verifier, r.Verdict, cell(r.Evidence))
	}
	return b.String()
}

// verifyCmd handles orch verify: a plan that is done (or was verified or
// refuted before) is put to verification again.
func (l *Loop) verifyCmd(ctx context.Context, e event.Event) (*Callback, string, error) {
	p := l.st.Plans[e.Plan]
	if p == nil || (p.State != PlanDone && p.State != PlanVerified && p.State != PlanRefuted) {
		state := PlanDraft
		if p != nil {
			state = p.State
		}
		return nil, l.refuse(e, fmt.Sprintf("plan %s is %s: only a harvested plan (done, verified, refuted) can be verified", e.Plan, state)), nil
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
		return nil, "", err
	}
	return cb, fmt.Sprintf("verification (%d rounds) started", rounds), nil
}

// verificationFailed settles the parent of a verification plan that ended
// failed (no RESULT.md, its workers lost, never acknowledged): the parent
// fails too, with the reason, instead of waiting in verifying for ever. The
// callback the lead gets names the parent.
func (l *Loop) verificationFailed(vp *Plan, cb *Callback) *Callback {
	parent := l.st.Plans[vp.VerifyOf]
	if vp.VerifyOf == "" || parent == nil || parent.State != PlanVerifying || parent.Verification == nil ||
		roundName(parent.Name, parent.Verification.Run, vp.Round) != vp.Name {
		return cb
	}
	parent.Verification.Outcome = PlanFailed
	parent.State, parent.Reason, parent.Updated = PlanFailed, fmt.Sprintf("verification round %d (%s) failed: %s", vp.Round, vp.Name, vp.Reason), l.cfg.Now().UTC()
	id := "vf-" + vp.Name
	if cb != nil {
		id = cb.Event
	}
	return newCallback(CallbackFailed, id, parent.Name, vp.Worker, parent.Reason, "")
}
