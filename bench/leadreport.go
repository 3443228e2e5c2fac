package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/orch-dev/orch/harvest"
)

// Markers of the lead loop's section of BENCHMARKS.md.
const (
	leadBegin = "<!-- bench:lead-loop:begin (written by go run ./bench; edits inside are overwritten) -->"
	leadEnd   = "<!-- bench:lead-loop:end -->"
)

// Targets from the benchmark issue.
const (
	targetReactionP99 = 5 * time.Millisecond
	targetDurable     = 3 * time.Second
	targetHarvestMore = 5 * time.Second // after all are durable
	targetIdleRatio   = 1.1
	targetIdleRSS     = 32 << 20
)

type leadData struct {
	Machine                    machine
	O                          options
	Load, BurstLoad, ServeLoad string
	Reaction                   *reactionResult
	Burst                      *burstResult
	Serve                      *serveResult
}

func ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "—"
		}
		return "∞"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func distRow(p func(string, ...any), label, anchor string, d dist) {
	p("| %s | %s | %d | %s | %s | %s | %s | %s |\n", label, anchor, d.N, fmtMs(d.Min), fmtMs(d.Med), fmtMs(d.P95), fmtMs(d.P99), fmtMs(d.Max))
}

func met(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func leadReport(d leadData) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m, o := d.Machine, d.O

	p("%s\n## Lead loop: reaction, burst, harvest throughput, idle cost, memory\n\n", leadBegin)
	p("Reproduce from the repo root, with go, git and tmux on `PATH`:\n\n")
	cmd := "go run ./bench -sections " + o.sections
	if o.smoke {
		cmd = "go run ./bench -smoke"
	} else {
		if o.reactionN != 200 {
			cmd += fmt.Sprintf(" -reaction-n %d", o.reactionN)
		}
		if o.burst != 1000 {
			cmd += fmt.Sprintf(" -burst %d", o.burst)
		}
		if o.idle != 30*time.Second {
			cmd += fmt.Sprintf(" -idle %v", o.idle)
		}
		if o.plans != 1000 {
			cmd += fmt.Sprintf(" -plans %d", o.plans)
		}
		if *serveWorkers != 8 {
			cmd += fmt.Sprintf(" -serve-workers %d", *serveWorkers)
		}
		if o.burstProfile != "" {
			cmd += " -burst-cpuprofile <file>" // its sampling is in the burst's CPU figures
		}
	}
	p("    %s -conc %d -out BENCHMARKS.md\n\n", cmd, o.conc)
	p("(`-conc` defaults to 4 × nproc.) Code measured: %s. Measured %s on %s, %s CPUs (`nproc`), %s, %s, %s. "+
		"Percentiles are nearest-rank; times in ms unless marked.\n\n", m.Commit, m.Date, m.CPU, m.NProc, m.Kernel, m.Go, m.Tmux)

	if r := d.Reaction; r != nil {
		p("### Reaction: from the durable ack to the lead loop's handler\n\n")
		p("A lead loop in the bench's process (`lead.Run`, scratch repo, one worker pane running `cat`, load average %s at the start). "+
			"Each round, untimed, the bench writes RESULT.md and dispatches the plan to w1 again; then it sends `done` one of two ways, "+
			"alternating, %d rounds each after %d warm-up rounds: (i) an in-process publisher holding an open worker-NKey connection over "+
			"loopback TCP (`notify.PublishOn`, what orch-notify does after connecting), whose anchor is the moment the JetStream ack "+
			"returns to it; (ii) the `orch-notify done` process as the README builds it (static), whose anchor is the moment it is reaped (it exits right after "+
			"its ack). The handler is seen from outside through inotify: the first `IN_OPEN` of `plans/bench/RESULT.md` after the send "+
			"began is `plans.ReadResult` in `lead.(*Loop).done`, reached after the event is parsed, its subject checked, the handled-id "+
			"record looked up and the holder checked, before any git command. `harvested` is the loop's log line after both commits "+
			"(slog's timestamp); `callback` is the moment a core subscriber on `orch.cb.>` in this process receives the callback the "+
			"loop publishes (to the stream, for `orch wait`) after saving its state.\n\n", d.Load, r.N, min(o.warmup, 5))
		p("| from → to | anchor | n | min | median | p95 | p99 | max |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
		distRow(p, "(i) publish → ack", "in-process publisher", r.PubToAck)
		distRow(p, "(i) **ack → handler** (RESULT.md opened)", "in-process publisher", r.AckToOpen)
		distRow(p, "(i) ack → harvested (2 commits)", "in-process publisher", r.AckToHarvest)
		distRow(p, "(i) ack → callback published", "in-process publisher", r.AckToCallback)
		distRow(p, "(ii) orch-notify exit → handler", "orch-notify reaped", r.ExitToOpen)
		distRow(p, "(ii) orch-notify exit → harvested", "orch-notify reaped", r.ExitToHarvest)
		distRow(p, "(ii) orch-notify exit → callback published", "orch-notify reaped", r.ExitToCallback)
		p("\nIn %d of %d rounds of (i) the handler opened RESULT.md before the ack reached the publisher (negative delays above: "+
			"the server pushes the message to the lead's consumer and sends the ack at the same time); in %d of %d rounds of (ii) "+
			"before orch-notify was reaped.\n\n", r.OpenBeforeAck, r.N, r.OpenBeforeExit, r.N)
		p("Target ack → handler p99 ≤ 5 ms: %s, p99 %s ms (in-process anchor)", met(r.AckToOpen.P99 <= targetReactionP99), fmtMs(r.AckToOpen.P99))
		if r.AckToOpen.P99 > targetReactionP99 {
			p(", %s ms over", fmtMs(r.AckToOpen.P99-targetReactionP99))
		}
		p(". Ack → callback, what `orch wait` can see, p99 %s ms.\n\n", fmtMs(r.AckToCallback.P99))
	}

	if bu := d.Burst; bu != nil {
		p("### Burst: %d orch-notify done at once\n\n", bu.N)
		p("A lead loop in the bench's process with %d worker panes running `cat` (one tmux window, enlarged to 1000×1000 by a "+
			"`session-created` hook so that the panes fit; dispatch acknowledgement timer off, since `cat` never says `started`), "+
			"%d plans, each dispatched to one of them and with its RESULT.md written. Untimed setup: the fleet came up in %.1f s, the %d "+
			"dispatch commands (published as `orch dispatch` does, after its checks) were typed in %.1f s. Then %d `orch-notify "+
			"done <plan> ok` processes (the README's static build), each with the `ORCH_WORKER` of the worker holding its plan, were launched at once through a "+
			"semaphore of %d (load average %s before). Times from the first launch.\n\n",
			bu.N, bu.N, bu.FleetUp.Seconds(), bu.N, bu.DispatchAll.Seconds(), bu.N, bu.Conc, d.BurstLoad)
		p("| figure | value |\n|---|--:|\n")
		p("| all durably acked (every orch-notify exited 0) | %.2f s |\n", bu.AllAcked.Seconds())
		p("| first harvest committed | %.2f s |\n", bu.FirstHarvest.Seconds())
		p("| all harvested and committed (%d plans named in %d `harvested` / `harvested together` log lines) | %.2f s |\n", bu.Harvested, bu.HarvestLines, bu.AllHarvested.Seconds())
		p("| … of which after all were acked | %.2f s |\n", (bu.AllHarvested - bu.AllAcked).Seconds())
		p("| batches (`harvested together`): lines / plans in them / largest | %d / %d / %d |\n", bu.Batches, bu.Batched, bu.MaxBatch)
		p("| one orch-notify under the burst, exec to exit: median / p95 / p99 / max | %s / %s / %s / %s ms |\n",
			fmtMs(bu.NotifyWall.Med), fmtMs(bu.NotifyWall.P95), fmtMs(bu.NotifyWall.P99), fmtMs(bu.NotifyWall.Max))
		p("| orch-notify exit ≠ 0 / exit 0 but spooled (not acked) | %d / %d |\n", bu.ExitNonZero, bu.Spooled)
		p("| plans not `done` in `orchctl.Status` | %d |\n", bu.NotDone)
		p("| commits touching a RESULT.md / with `%s` trailers / LEDGER.jsonl entries / callbacks | %d / %d / %d / %d |\n",
			harvest.TrailerLedger, bu.HarvestCommits, bu.LedgerCommits, bu.LedgerEntries, bu.Callbacks)
		p("| **lost** (a plan not done, or with no commit touching its RESULT.md, no `%s` trailer for its event, no ledger entry on disk or in HEAD, or no callback) | **%d** |\n", harvest.TrailerLedger, bu.Lost)
		p("| **doubled** (a plan with two or more of any of them) | **%d** |\n\n", bu.Doubled)
		for _, w := range first(bu.LostWhy, 5) {
			p("- lost: %s\n", w)
		}
		for _, w := range first(bu.DoubledWhy, 5) {
			p("- doubled: %s\n", w)
		}
		durOK := bu.AllAcked <= targetDurable && bu.Spooled == 0 && bu.ExitNonZero == 0
		p("Targets: all durable ≤ 3 s: %s, %.2f s", met(durOK), bu.AllAcked.Seconds())
		if bu.AllAcked > targetDurable {
			p(" (%.2f s over)", (bu.AllAcked - targetDurable).Seconds())
		}
		more := bu.AllHarvested - bu.AllAcked
		p("; all harvested ≤ 5 s after that: %s, %.2f s", met(more <= targetHarvestMore), more.Seconds())
		if more > targetHarvestMore {
			p(" (%.2f s over, %.1f×)", (more - targetHarvestMore).Seconds(), more.Seconds()/targetHarvestMore.Seconds())
		}
		p("; 0 lost, 0 doubled: %s (%d, %d).\n\n", met(bu.Lost == 0 && bu.Doubled == 0), bu.Lost, bu.Doubled)

		p("### Harvest throughput (same burst)\n\n")
		p("| figure | value |\n|---|--:|\n")
		p("| plans harvested and committed per second, launch to last harvest | %.1f /s |\n", bu.Throughput)
		p("| same, first to last harvest (steady state) | %.1f /s |\n", bu.SteadyThroughput)
		p("| time between consecutive harvests (0 within a batch), first tenth: median / p99 | %s / %s ms |\n", fmtMs(bu.IntervalFirst.Med), fmtMs(bu.IntervalFirst.P99))
		p("| same, last tenth | %s / %s ms |\n", fmtMs(bu.IntervalLast.Med), fmtMs(bu.IntervalLast.P99))
		p("| CPU of the bench process (lead loop, broker, launcher) / of its reaped children (git, orch-notify, tmux), launch to last harvest | %.1f s / %.1f s |\n",
			bu.SelfCPU.Seconds(), bu.ChildCPU.Seconds())
		p("| commits in the repo afterwards | %d |\n", bu.Commits)
		p("| `git.RecentTrailers` (`Orch-Event` trailers of the last 200 commits, the harvest's crash check), median / p95 | %s / %s ms |\n", fmtMs(bu.RecentTrailersEnd.Med), fmtMs(bu.RecentTrailersEnd.P95))
		p("| one git process (`git rev-parse --verify -q HEAD`), median | %s ms |\n", fmtMs(bu.GitFloor.Med))
		p("| `.orch/state.json` afterwards (rewritten several times per event) | %d KiB |\n\n", bu.StateBytes/1024)
	}

	if s := d.Serve; s != nil {
		p("### Idle cost and memory: `orch serve` as a process\n\n")
		p("`CGO_ENABLED=0 go build ./cmd/orch ./cmd/orch-notify` (the README's build) into a temporary directory put first on `PATH`, `orch init` on a scratch repo, "+
			"`orch serve --workers %d --agent cat` with `ORCH_TMUX_SOCKET` set to a private tmux server (load average %s before). "+
			"Beside it, at the same time, the baseline: `go run ./bench -bare-server <dir>` in its own process, which runs `broker.Start` "+
			"(the embedded nats-server with JetStream, the one stream and its two consumers, as orch serve configures them) and "+
			"blocks reading stdin. Both are left %v to settle after start, then measured over the same %v window: utime+stime "+
			"from `/proc/<pid>/stat` (10 ms ticks, dead threads included), on-CPU time summed over `/proc/<pid>/task/*/schedstat` "+
			"(ns), context switches (voluntary + nonvoluntary) summed over `/proc/<pid>/task/*/status`. The tmux server and the "+
			"`cat` panes are other processes and not counted.\n\n", s.Workers, d.ServeLoad, s.Settle, s.Serve.Window.Round(time.Millisecond))
		p("| process | CPU ticks in window | CPU ms/s (ticks) | on-CPU ms/s (schedstat) | context switches/s | threads | VmRSS MiB | VmHWM MiB |\n")
		p("|---|--:|--:|--:|--:|--:|--:|--:|\n")
		row := func(label string, c idleCost) {
			p("| %s | %d | %.3f | %.3f | %.2f | %d | %.1f | %.1f |\n", label, c.CPUTicks, c.CPUmsPerSec, c.RunMsPerSec, c.SwitchesPerS, c.Threads, mib(c.RSSEnd), mib(c.HWMEn))
		}
		row(fmt.Sprintf("orch serve, %d idle workers", s.Workers), s.Serve)
		row("bare broker (`-bare-server`)", s.Bare)
		p("| ratio orch serve ÷ bare | %s | %s | %s | %s | | %s | |\n\n", ratio(float64(s.Serve.CPUTicks), float64(s.Bare.CPUTicks)),
			ratio(s.Serve.CPUmsPerSec, s.Bare.CPUmsPerSec), ratio(s.Serve.RunMsPerSec, s.Bare.RunMsPerSec),
			ratio(s.Serve.SwitchesPerS, s.Bare.SwitchesPerS), ratio(float64(s.Serve.RSSEnd), float64(s.Bare.RSSEnd)))
		cpuR := s.Serve.RunMsPerSec / max(s.Bare.RunMsPerSec, 1e-9)
		p("Target idle CPU ≤ 1.1× the bare server's: %s, %.2f× by schedstat on-CPU time (%.3f against %.3f ms/s; by ticks %d against %d).\n\n",
			met(cpuR <= targetIdleRatio), cpuR, s.Serve.RunMsPerSec, s.Bare.RunMsPerSec, s.Serve.CPUTicks, s.Bare.CPUTicks)
		p("Memory, orch serve: idle (end of the window above) VmRSS %.1f MiB, VmHWM %.1f MiB; after %d plans run through its %d workers "+
			"(%d dispatch commands kept ahead of them; each `dispatched` log line answered by `orch-notify done` from that worker; %.1f s "+
			"for all, %d harvested) VmRSS %.1f MiB, VmHWM %.1f MiB, %d threads.\n\n",
			mib(s.Serve.RSSEnd), mib(s.Serve.HWMEn), s.Plans, s.Workers, 2*s.Workers, s.PlansWall.Seconds(), s.Harvested, mib(s.After.RSS), mib(s.After.HWM), s.After.Threads)
		p("Target RSS ≤ 32 MiB idle: %s, %.1f MiB", met(s.Serve.RSSEnd <= targetIdleRSS), mib(s.Serve.RSSEnd))
		if s.Serve.RSSEnd > targetIdleRSS {
			p(" (%.1f MiB over)", mib(s.Serve.RSSEnd-targetIdleRSS))
		}
		p(".\n\n")
	}
	p("%s\n", leadEnd)
	return b.String()
}
