package main

import (
	"fmt"
	"strings"
	"time"
)

// Markers of the wake section of BENCHMARKS.md.
const (
	wakeBegin = "<!-- bench:lead-wake:begin (written by go run ./bench; edits inside are overwritten) -->"
	wakeEnd   = "<!-- bench:lead-wake:end -->"
)

func wakeReport(m machine, o options, w wakeResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("%s\n## Lead wake-up: a worker's done reaching an agent lead\n\n", wakeBegin)
	p("Reproduce from the repo root, with go, git and tmux on `PATH`:\n\n")
	cmd := "go run ./bench -sections " + o.sections
	if o.smoke {
		cmd = "go run ./bench -smoke"
	} else {
		if o.wakeN != 200 {
			cmd += fmt.Sprintf(" -wake-n %d", o.wakeN)
		}
		if o.wakeStep != 250*time.Millisecond {
			cmd += fmt.Sprintf(" -wake-step %v", o.wakeStep)
		}
		cmd += " -out BENCHMARKS.md"
	}
	p("    %s\n\n", cmd)
	p("Code measured: %s. Measured %s on %s, %s CPUs (`nproc`), %s, %s, %s; load average %s before the timed rounds, %s after. "+
		"Percentiles are nearest-rank; times in ms from the exec of `orch-notify done` unless marked.\n\n",
		m.Commit, m.Date, m.CPU, m.NProc, m.Kernel, m.Go, m.Tmux, w.Load, w.LoadEnd)
	p("`CGO_ENABLED=0 go build ./cmd/orch ./cmd/orch-notify` (the README's build), a scratch repo with one plan, `orch lead install claude` in it, "+
		"`orch serve --workers 1 --agent cat --isolation shared` as a process on a private tmux server. The bench plays the Claude Code lead: "+
		"it runs the hook commands the install wrote into `.claude/settings.local.json` as Claude Code runs them (`/bin/sh -c <command>` in the "+
		"project directory, `CLAUDE_PROJECT_DIR` set, the hook's JSON on stdin, stdout and stderr pipes read to the end). Each round, untimed, "+
		"it writes RESULT.md and runs `orch dispatch wake --to w1` (and waits for orch serve's `dispatched` line); then a worker's last step, "+
		"`orch-notify done wake \"round <r> ok\"` with the environment orch serve gives a worker pane. `callback` is when a core subscriber on "+
		"`orch.cb.>` in the bench receives the callback the lead loop publishes to the stream (after the harvest's commits), which the lead's "+
		"inbox consumer reads. %d rounds of each kind after %d warm-up rounds.\n\n", w.N, w.Warm)

	p("### Idle lead: the waiting hook wakes it\n\n")
	p("Before each done the `Stop` hook (`asyncRewake`: Claude Code runs it in the background after a turn and starts a turn with its " +
		"stderr when it exits 2) is started and left until its pull request for the lead's inbox reaches the server (a core subscriber on " +
		"`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` sees it): the hook is armed, as it is for an idle lead. Timed: until the hook " +
		"process is reaped, having exited 2 with `WORKER-DONE wake: round <r> ok` on its stderr (checked every round). " +
		"After each such round, the seed's path with the same line: `tmux send-keys -t %%0 '<line>' Enter` into a pane running `cat` " +
		"on a private tmux server, seen by a control-mode client of that server (`tmux -C attach`, its `%%output` notifications): the line " +
		"appears in the pane (the terminal's echo), and `cat` has read it (its copy of the line after the Enter's newline), the moment a " +
		"program at its prompt has the submitted line.\n\n")
	p("Where the hook's time goes: from the callback on, the hook has its pull answered at once, then goes on gathering for its settle " +
		"window (`hookSettle` in internal/orchctl/lead.go, 150 ms when this was written: callbacks that arrive together wake the lead once), " +
		"writes the lines, records them taken, acknowledges them and exits; before the callback, the lead loop harvests the event " +
		"(its git commits) and saves its state (the reaction section times those from the ack).\n\n")
	p("| from → to | n | min | median | p95 | p99 | max |\n|---|--:|--:|--:|--:|--:|--:|\n")
	row := func(label string, d dist) {
		p("| %s | %d | %s | %s | %s | %s | %s |\n", label, d.N, fmtMs(d.Min), fmtMs(d.Med), fmtMs(d.P95), fmtMs(d.P99), fmtMs(d.Max))
	}
	row("done exec → orch-notify reaped (acked)", w.NotifyExit)
	row("done exec → callback published", w.Callback)
	row("done exec → the line read from the hook's stderr", w.HookLine)
	row("**done exec → Stop hook reaped, exit 2, line on stderr**", w.HookExit)
	row("callback published → Stop hook reaped", w.CbToExit)
	row("(seed) send-keys exec → tmux reaped", w.KeysExit)
	row("**(seed) send-keys exec → line appears in the pane**", w.KeysAppear)
	row("(seed) send-keys exec → `cat` has read it", w.KeysRead)
	p("\nRatio, hook exit ÷ send-keys, same run: median %s (%s ms against %s ms the line appears; %s against `cat` has read it), "+
		"p99 %s (%s ms against %s ms; %s).\n\n",
		ratio(msOf(w.HookExit.Med), msOf(w.KeysAppear.Med)), fmtMs(w.HookExit.Med), fmtMs(w.KeysAppear.Med), ratio(msOf(w.HookExit.Med), msOf(w.KeysRead.Med)),
		ratio(msOf(w.HookExit.P99), msOf(w.KeysAppear.P99)), fmtMs(w.HookExit.P99), fmtMs(w.KeysAppear.P99), ratio(msOf(w.HookExit.P99), msOf(w.KeysRead.P99)))

	p("### Mid-turn lead: the next step takes it\n\n")
	p("No hook waits (a lead mid-turn has none: its waiting hook woke it, or the prompt's hook took the inbox over). After the done's exec "+
		"the bench plays the lead's steps: at %v after it, and every %v after that until one carries the line, it runs the installed "+
		"`PostToolUse` hook (what Claude Code runs after each tool call; `UserPromptSubmit` runs the same code) and checks its stdout: "+
		"Claude Code's JSON with the line in `additionalContext`. The step time is set by the bench, standing for the lead's own work; "+
		"what orch adds is the hook's own time. So read the rows as: the line is ready for a step from `callback published` on; a step at "+
		"or after that has it when its hook returns, the hook's own time later.\n\n", w.Step, w.Step)
	p("| from → to | n | min | median | p95 | p99 | max |\n|---|--:|--:|--:|--:|--:|--:|\n")
	row("done exec → callback published (a step from here on carries it)", w.MidCallback)
	row("**the step's hook: its exec → reaped with the line as context**", w.MidHookOwn)
	row(fmt.Sprintf("done exec → that hook reaped (steps every %v)", w.Step), w.MidDoneToExit)
	p("\nSteps that came before the callback and carried nothing (the line came at a later step): %d of the %d timed rounds' %d steps.\n\n",
		w.MidEmpty, w.N, w.N+w.MidEmpty)

	p("### orch-notify start-up against tmux send-keys, same rounds\n\n")
	p("From the idle rounds above (each process from its exec to its reaping; `orch-notify done` against orch serve as a process, its "+
		"event acked): median %s ms against %s ms, **%s**; p99 %s against %s ms, %s. The start-up section measures the same pair "+
		"more carefully (interleaved with other cases, shuffled).\n\n",
		fmtMs(w.NotifyExit.Med), fmtMs(w.KeysExit.Med), ratio(msOf(w.NotifyExit.Med), msOf(w.KeysExit.Med)),
		fmtMs(w.NotifyExit.P99), fmtMs(w.KeysExit.P99), ratio(msOf(w.NotifyExit.P99), msOf(w.KeysExit.P99)))
	p("%s\n", wakeEnd)
	return b.String()
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
