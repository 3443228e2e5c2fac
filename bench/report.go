package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Targets from the benchmark issue.
const (
	targetSizeBytes = 7 << 20 // orch-notify stripped
	targetRatio     = 1.5     // orch-notify done median over tmux send-keys median
)

// The generated section sits between these markers; the rest of the file is
// left alone, so other benchmarks can have sections of their own.
const (
	markBegin = "<!-- bench:orch-notify-startup:begin (written by go run ./bench; edits inside are overwritten) -->"
	markEnd   = "<!-- bench:orch-notify-startup:end -->"
)

type machine struct {
	CPU, NProc, Go, Kernel, Tmux, Date string
	Commit                             string // the orch commit, and whether the tree differs from it
}

func machineInfo(ctx context.Context, root string) machine {
	m := machine{CPU: "?", NProc: fmt.Sprint(runtime.NumCPU()), Go: runtime.Version(),
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	out := func(name string, args ...string) string {
		b, err := exec.CommandContext(ctx, name, args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if s := out("nproc"); s != "" {
		m.NProc = s
	}
	if s := out("go", "version"); s != "" {
		m.Go = s
	}
	m.Kernel = out("uname", "-sr")
	m.Tmux = out("tmux", "-V")
	m.Commit = "unknown (not a git checkout)"
	if sha := out("git", "-C", root, "rev-parse", "--short=10", "HEAD"); sha != "" {
		m.Commit = "commit `" + sha + "`, no other changes than bench/ and BENCHMARKS.md"
		dirty := out("git", "-C", root, "status", "--porcelain", "--", ".", ":!bench", ":!BENCHMARKS.md")
		if dirty != "" {
			var files []string
			for _, l := range strings.Split(dirty, "\n") {
				// "XY path"; out trims the first line's leading space.
				if l = strings.TrimSpace(l); len(l) > 2 {
					files = append(files, strings.TrimSpace(l[2:]))
				}
			}
			more := ""
			if len(files) > 5 {
				files, more = files[:5], fmt.Sprintf(" and %d more", len(files)-5)
			}
			m.Commit = "commit `" + sha + "` **with uncommitted changes** in " + strings.Join(files, ", ") + more
		}
	}
	return m
}

type reportData struct {
	Machine   machine
	N, Warmup int
	Bins      binaries
	Startup   startupResult
	Code      codeReport
	Init      initReport
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func report(d reportData) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m, s := d.Machine, d.Startup

	p("%s\n## orch-notify size and start-up\n\n", markBegin)
	p("Reproduce from the repo root, with go, git and tmux on `PATH`:\n\n")
	cmd := fmt.Sprintf("go run ./bench -n %d", d.N)
	if d.Warmup != defaultWarmup {
		cmd += fmt.Sprintf(" -warmup %d", d.Warmup)
	}
	p("    %s -out BENCHMARKS.md\n\n", cmd)
	p("Code measured: %s. ", m.Commit)
	p("Measured %s on %s, %s CPUs (`nproc`), %s, %s, %s; load average %s when the timed rounds began, %s when they ended.\n\n",
		m.Date, m.CPU, m.NProc, m.Kernel, m.Go, m.Tmux, s.Load, s.LoadEnd)

	p("### Size\n\n")
	p("| binary | built with | bytes | MiB | linking |\n|---|---|--:|--:|---|\n")
	for _, bin := range d.Bins.list() {
		p("| %s | `%s` | %d | %.2f | %s |\n", bin.Label, bin.Build, bin.Size, mib(bin.Size), bin.Link)
	}
	st := d.Bins.stripped.Size
	if st <= targetSizeBytes {
		p("\nTarget orch-notify ≤ 7 MiB stripped: **met**, %.2f MiB, %.2f MiB (%.0f%%) under.\n\n",
			mib(st), mib(targetSizeBytes-st), 100*float64(targetSizeBytes-st)/targetSizeBytes)
	} else {
		p("\nTarget orch-notify ≤ 7 MiB stripped: **missed**, %.2f MiB, %.2f MiB (%.0f%%) over.\n\n",
			mib(st), mib(st-targetSizeBytes), 100*float64(st-targetSizeBytes)/targetSizeBytes)
	}

	p("### Start-up: exec to exit\n\n")
	p("%d timed runs of each case after %d warm-up rounds, interleaved: each round runs every case once, "+
		"in an order shuffled anew each round (fixed seed). Times in ms, from just before fork/exec (`os/exec`) "+
		"to just after the child is reaped; percentiles are nearest-rank. The timed rounds took %.0f s of wall time, "+
		"most of it the untimed lead-loop work around the done cases.\n\n", d.N, d.Warmup, s.Wall.Seconds())
	p("| case | command | min | median | p95 | p99 | max | median ÷ send-keys | median ÷ empty |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range s.Cases {
		p("| %s | `%s` | %s | %s | %s | %s | %s | %.2f× | %.2f× |\n", c.Label, c.Cmdline,
			fmtMs(c.Min), fmtMs(c.Med), fmtMs(c.P95), fmtMs(c.P99), fmtMs(c.Max), c.RatioSendKeys, c.RatioEmpty)
	}
	p("\n")
	p("- (a) is `package main; func main(){}`, stripped: the floor of exec + Go runtime start-up on this machine.\n")
	p("- (b) is orch-notify exactly as the README builds it (`CGO_ENABLED=0 go build`, static) given an unknown event " +
		"kind: runtime and package init, argument parsing, usage line, exit 2; it neither reads .orch/ nor dials the broker.\n")
	hasCgo := s.byKey(keyBadCgo).N > 0
	if hasCgo {
		p("- (b') is (b) built with cgo on, Go's default wherever a C compiler is installed, to show what the README's " +
			"`CGO_ENABLED=0` saves: with cgo, the `net` package links the libc DNS resolver, so the binary needs `ld.so` and libc.\n")
	} else {
		p("- (b') and (c'), the cgo build, are left out: cgo could not build a dynamically linked orch-notify on this machine.\n")
	}
	p("- (c) is what a worker runs as its last step, with the environment `orch serve` gives a worker pane " +
		"(`ORCH_URL`, `ORCH_CREDS`, `ORCH_WORKER=w1`, `ORCH_DIR`, `ORCH_PREFIX`): connect to the embedded NATS server with the " +
		"worker NKey, publish one event, wait for the JetStream ack, exit 0. The lead loop runs in the bench's " +
		"process (`lead.Run` on a scratch repo made with `orchctl.Init` and `orchctl.NewPlan`, one tmux worker pane " +
		"running `cat`). Before each run, untimed, the bench writes a new RESULT.md, dispatches the plan to w1 " +
		"and waits for the loop's `dispatched` log line; after it, untimed, it waits for `harvested`. ")
	if len(s.Refused) == 0 {
		p("All %d timed done events were accepted and harvested (RESULT.md and ledger commits). ", s.Accepted)
	} else {
		p("%d timed done events were accepted and harvested; the lead refused the others:", s.Accepted)
		for why, n := range s.Refused {
			p(" %d× %s;", n, why)
		}
		p(" the refusal does not change the timing: the broker acks before the loop handles the event. ")
	}
	p("The broker acks once the event is stored; the harvest runs after the ack, but on the same CPUs.\n")
	if hasCgo {
		p("- (c') is (c) run with the cgo build of (b'); the same lead loop, preparation and settling as (c).\n")
	}
	p("- (c'') is (c) against a bare broker: this binary's hidden `-bare-server` mode, `broker.Start` as orch serve starts " +
		"its own (stream, consumers, credentials), alone in its own process with no lead loop reading it: no preparation, " +
		"no settling, nothing harvested of its own (the lead loop may still be finishing the previous round's event, as " +
		"for any case). Its difference from (c) is what the harvest of the notifier's own event, which starts at the ack, " +
		"costs it on these CPUs.\n")
	p("- (d) is the line a worker would otherwise type into the lead's pane, sent to a pane running `cat` on a " +
		"private tmux server (its own socket, nothing else on it).\n\n")

	p("Runs that came right after a run of a done case harvested by the lead loop ((c), (c')) in the same round, while the loop may still be finishing " +
		"that event (callback, ack) on the same CPUs, against the others, medians in ms:")
	for _, c := range s.Cases {
		if !isDone(c.Key) && c.NAfterDone > 0 && c.MedOtherwise > 0 {
			p(" %s %s (%d runs) vs %s;", c.Label[:strings.Index(c.Label, ")")+1], fmtMs(c.MedAfterDone), c.NAfterDone, fmtMs(c.MedOtherwise))
		}
	}
	p(" the shuffled order spreads this over all cases.\n\n")

	sk := s.byKey(keySendKeys)
	for _, k := range []string{keyDone, keyDoneCgo} {
		done := s.byKey(k)
		if done.N == 0 {
			continue
		}
		label := done.Label[:strings.Index(done.Label, ")")+1]
		if done.RatioSendKeys <= targetRatio {
			p("Target orch-notify done median ≤ %.1f× tmux send-keys median, %s: **met**, %.2f× (%s ms against %s ms).\n\n",
				targetRatio, label, done.RatioSendKeys, fmtMs(done.Med), fmtMs(sk.Med))
		} else {
			limit := time.Duration(targetRatio * float64(sk.Med))
			p("Target orch-notify done median ≤ %.1f× tmux send-keys median, %s: **missed**, %.2f× (%s ms against %s ms): "+
				"the median would have to come down by %s ms, to %s ms, to meet it.\n\n",
				targetRatio, label, done.RatioSendKeys, fmtMs(done.Med), fmtMs(sk.Med), fmtMs(done.Med-limit), fmtMs(limit))
		}
	}

	if bare, done := s.byKey(keyDoneBare), s.byKey(keyDone); bare.N > 0 && done.N > 0 {
		diff, than := done.Med-bare.Med, "less"
		if diff < 0 {
			diff, than = -diff, "more"
		}
		p("Against the bare broker, (c''): %.2f× send-keys (%s ms), %s ms %s than (c). ",
			bare.RatioSendKeys, fmtMs(bare.Med), fmtMs(diff), than)
		if bare.RatioSendKeys <= targetRatio {
			p("Within the target's %.1f×; this is not the target's case, which is (c).\n\n", targetRatio)
		} else {
			p("Above the target's %.1f× even so.\n\n", targetRatio)
		}
	}

	if d.Init.Runs > 0 || len(d.Code.Modules) > 0 {
		p("### Where the time and the bytes go (leads for later work)\n\n")
	}
	if d.Init.Runs > 0 {
		it := d.Init
		p("`GODEBUG=inittrace=1 orch-notify %s`, %d runs, medians: %d packages run init code, %s ms in all; the "+
			"last init ends %s ms after the runtime starts (tracing itself adds to both). The ten most expensive:\n\n",
			strings.Join(badArgs, " "), it.Runs, it.Packages, fmtMs(it.Total), fmtMs(it.MainAt))
		p("| package | init ms | bytes | allocs |\n|---|--:|--:|--:|\n")
		for _, c := range it.Top {
			p("| `%s` | %.3f | %d | %d |\n", c.Pkg, float64(c.Clock)/float64(time.Millisecond), c.Bytes, c.Allocs)
		}
		p("\n")
	}
	if len(d.Code.Modules) > 0 {
		p("Machine code (text symbols, `go tool nm -size` on the unstripped build) by module, %.2f MiB in all; "+
			"the stripped file also carries the pclntab, type data and rodata, which grow with it:\n\n", mib(d.Code.Text))
		p("| module | KiB | share |\n|---|--:|--:|\n")
		for _, c := range d.Code.Modules {
			p("| `%s` | %.0f | %.0f%% |\n", c.Name, float64(c.Bytes)/1024, 100*float64(c.Bytes)/float64(d.Code.Text))
		}
		p("\nLargest packages: ")
		for i, c := range d.Code.Packages {
			if i > 0 {
				p(", ")
			}
			p("`%s` %.0f KiB", c.Name, float64(c.Bytes)/1024)
		}
		p(".\n\n")
	}
	p("%s\n", markEnd)
	return b.String()
}

const fileHeader = "# Benchmarks\n\nFigures measured on a real machine by the command given in each section. " +
	"They hold for that machine and that day: re-run the command rather than trusting old numbers.\n\n"

// writeSection puts section into the file at path: in place of the old one
// between the markers, or at the end.
func writeSection(path, section string) error {
	return writeMarked(path, section, markBegin, markEnd)
}

// writeMarked puts section into the file at path in place of the text
// between the markers begin and end, or at the end of the file.
func writeMarked(path, section, markBegin, markEnd string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return os.WriteFile(path, []byte(fileHeader+section), 0o644)
	}
	if err != nil {
		return err
	}
	text := string(data)
	i, j := strings.Index(text, markBegin), strings.Index(text, markEnd)
	switch {
	case i >= 0 && j > i:
		j += len(markEnd)
		if j < len(text) && text[j] == '\n' {
			j++
		}
		text = text[:i] + section + text[j:]
	case i < 0 && j < 0:
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "\n" + section
	default:
		return fmt.Errorf("%s: only one of the markers %q, %q is there; fix the file by hand", path, markBegin, markEnd)
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
