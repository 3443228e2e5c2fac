package lead

import (
	"context"
	"fmt"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/internal/state"
)

// The loop's side of a plan's acceptance gates: which code they run in
// (gateJob), and their verdict turned into a "gated" record in the stream
// (publishGated), to be handled like any event (and redelivered after a
// crash). The commands themselves run in package gates, off the loop; a
// crash while they run leaves the plan verifying, and the next start runs
// them again (reportRegates).

// gateJob is the gate run for p's current attempt.
func (l *Loop) gateJob(ctx context.Context, p *state.Run, cmds []string) gates.Job {
	j := gates.Job{Plan: p.Name, Attempt: p.Attempts, Cmds: cmds, Dir: l.cfg.Root, Worker: p.Worker, As: l.fleet.User(p.Worker)}
	if l.isolated() {
		if sha, err := l.repo.RevParse(ctx, "refs/heads/"+fleet.PlanBranch(p.Name)); err == nil {
			j.Rev = sha
		} else {
			j.Dir = l.workDir(p.Worker) // no branch (a worker that never switched): its worktree
		}
	}
	return j
}

// publishGated puts the verdict of a plan attempt's gates into the stream
// as a gated record, with an id of its own per attempt.
func (l *Loop) publishGated(f gates.Finished) {
	e := l.record(event.Gated, event.DerivedID(fmt.Sprintf("gated %s %d", f.Plan, f.Attempt)), f.Plan, "", f.Verdict)
	e.Attempt = f.Attempt
	l.publishRecord(e)
}
