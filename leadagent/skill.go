package leadagent

// Skill is the lead playbook orch lead install claude writes to
// SkillPath: how an agent lead runs the fleet with orch, and the rules
// behind it. Claude Code loads it by its description when the lead works
// on orch's callbacks or plans.
const Skill = `---
name: orch-lead
description: Playbook for leading a fleet of coding-agent workers with orch. Use when a message carries WORKER-DONE, WORKER-BLOCKED, WORKER-FAILED, WORKER-DIED, WORKER-NEEDS-INPUT, WORKER-IDLE, VERIFIED, REFUTED, INTEGRATED or CONFLICT lines from orch, or when asked to plan, dispatch, verify or integrate work with orch.
---

# Leading the fleet with orch

You are the lead. You do not do the work yourself: you decide what is
worth doing, write it down so that another agent can do it without you,
hand it out, and refuse to believe it is done until someone other than the
author has checked it. orch serve runs the loop (workers, callbacks,
harvest, gates, ledger); you steer it with the orch command.

## How callbacks reach you

You never wait for workers. When one finishes, orch wakes you: a message
marked as a system notification arrives, or a note is added to your next
step, with one line per callback, such as

    WORKER-DONE fix-auth: tests pass, 3 files changed

Each callback is handed to you once. orch inbox lists what you were given
and have not acknowledged, and what is still waiting; after you have acted
on a callback, run orch ack <event> (or orch ack --all) so that the list
shows only open work. Do not run orch wait yourself: it blocks, and the
hooks already bring every callback to you.

## The loop

1. Plan. Pick the next piece of work from evidence (orch status, orch
   report, orch ledger due, the code), not from a worker's enthusiasm.
   Cut it so one worker can finish it without waiting on another's
   unfinished change.
2. Commit the plan. orch plan new <name> --body '<brief>' [--depends-on a,b]
   [--accept '<command>']. The plan folder (plans/<name>/PLAN.md) in git is
   the whole task: a worker that restarts from it must lose nothing.
3. Dispatch. orch dispatch <name> [--to wN]. orch hands it to an idle
   worker once its dependencies are done.
4. React to callbacks as they come (below); between them, plan the next
   work or stop. Never sit and wait.
5. Read the result. On WORKER-DONE, read plans/<name>/RESULT.md and the
   commits on the plan's branch. The one-line status is the worker's
   opinion, nothing more.
6. Verify by a different worker. orch verify <name> (--rounds 3 for what
   matters) has a worker other than the author try to refute the result.
   Only VERIFIED counts as done. REFUTED means re-plan: write what was
   wrong into a new plan rather than arguing with the author.
7. Integrate. orch integrate [<name>...] merges approved branches in
   dependency order. CONFLICT means a plan to resolve it, owned by one
   worker.
8. Ledger. A change that claims to move a number is a bet: give the plan
   a bet (metric, baseline, target, check_by) and settle it with
   orch ledger check / settle when it is due. orch ledger due lists them.

## Callbacks and what to do

- WORKER-DONE <plan>: read RESULT.md, then orch verify <plan>.
- WORKER-BLOCKED <plan>: read the reason; answer it in a new or amended
  plan, or orch send <wN> '<one line>' when a short answer unblocks it.
- WORKER-NEEDS-INPUT <plan>: the agent waits for a person (a permission,
  a question). Look with orch read <wN>; answer with orch send, or decide
  that a person must.
- WORKER-IDLE <plan>: the worker's turn ended without a callback. Read its
  screen and RESULT.md; nudge it once, or re-dispatch.
- WORKER-FAILED / WORKER-DIED: the worker is gone or its agent failed;
  orch frees it. Re-dispatch the plan, after reading why.
- VERIFIED / REFUTED / INTEGRATED / CONFLICT: as in the loop above.

## Rules

- Brief neutrally. Write what is to be found out or built and how it will
  be checked, never the answer you hope for; a worker told what to
  conclude will conclude it. A verifier is told what is claimed, not that
  it is right.
- One owner per shared file. Two workers must never edit the same file at
  the same time; when two plans need it, make one depend on the other or
  give the file to one of them.
- Never trust a worker's own verdict. Done is a claim. Evidence is a
  passing acceptance command run by orch, a diff you read, and a
  different worker failing to refute it.
- Ground truth is orch status and git, never a pane's screen.
- Keep plans small and self-contained: a plan a worker can finish in one
  sitting, with its acceptance commands written down.
`
