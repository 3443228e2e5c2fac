// Command bench measures orch against what it replaces and writes the
// figures into BENCHMARKS.md: orch-notify's size and start-up against an
// empty Go binary and the tmux send-keys line (section "startup"), and the
// lead loop's reaction, burst, harvest throughput, idle cost and memory
// (sections "reaction", "burst", "serve"), and an agent lead's wake-up by
// its hooks against tmux send-keys (section "wake").
//
// README: go run ./bench [-sections all] [-n 200] [-burst 1000] [-idle 30s] [-plans 1000] [-wake-n 200] [-out BENCHMARKS.md]   (from the repo root; needs go, git and tmux)
// CI:     go run ./bench -smoke   (about 30 s; prints the sections; exits 1 if a plan is lost or doubled or an event not acked)
//
// What it does, in order:
//
//  1. builds orch-notify as the README does (CGO_ENABLED=0: the one timed
//     everywhere), the same stripped (-ldflags='-s -w' -trimpath, for the
//     size target), with cgo on (Go's default where a C compiler is
//     installed, timed beside it in the start-up section), and an empty Go
//     binary stripped, into a temporary directory, and reports their sizes;
//  2. startup (startup.go): times exec to exit, n runs of each case,
//     interleaved (every round runs each case once, in an order shuffled
//     anew every round, after a few warm-up rounds that are not counted):
//     the empty binary; orch-notify with bad arguments (start-up and
//     argument parsing, exit 2); the same with the cgo build;
//     orch-notify done <plan> against a real lead loop (lead.Run in this
//     process, a scratch repo, one tmux worker running cat, the plan
//     dispatched to it before each run so that every done is accepted and
//     harvested), with the README's build and with the cgo one; and
//     tmux send-keys of a WORKER-DONE line into a pane
//     running cat on a private tmux server; then runs orch-notify with
//     GODEBUG=inittrace=1 to rank its packages' init cost, and attributes
//     its code size to modules with go tool nm;
//  3. reaction (reaction.go): against a lead loop in this process, the
//     delay from a done's durable ack (an in-process publisher) or from
//     orch-notify's exit to the handler opening RESULT.md (seen with
//     inotify), to the harvest's log line and to the callback;
//  4. burst (burst.go): -burst plans dispatched to as many cat panes, one
//     orch-notify done each, launched at once through -conc slots; time to
//     all acked and all harvested, throughput, and lost/doubled counted
//     from orchctl.Status, git log, LEDGER.jsonl and the callbacks;
//  5. serve (serve.go): orch serve --workers 8 --agent cat as a real
//     process beside a bare broker (this binary's hidden -bare-server
//     mode), both idle for -idle: CPU and context switches from /proc;
//     then -plans plans through its fleet, and its memory again;
//  6. wake (wake.go): a Claude Code lead's wake-up through the hooks orch
//     lead install claude writes, against orch serve as a process: from
//     orch-notify done's exec to the waiting Stop hook exiting 2 with the
//     line (idle lead), beside tmux send-keys of the same line into a cat
//     pane seen on a control-mode client, in the same rounds; and to the
//     PostToolUse hook handing it over at a mid-turn lead's next step;
//  7. scale (scale.go, only when named in -sections): the event rate one
//     lead loop sustains, workers per loop, and the record's growth with
//     plans; printed, for SCALING.md;
//  8. writes each section of BENCHMARKS.md between its marker comments,
//     leaving the rest of the file as it is (or prints them with -out -).
//
// It is a command, not a test: go test ./... never runs it. A new start-up
// case is one more entry in the list in startup.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

const defaultWarmup = 5

type options struct {
	n       int
	warmup  int
	out     string
	raw     string
	verbose bool

	sections  string // comma-separated: startup, reaction, burst, serve, wake, scale
	reactionN int
	burst     int
	conc      int
	idle      time.Duration
	plans     int
	smoke     bool
	wakeN     int           // wake section: rounds of each kind (idle lead, mid-turn lead)
	wakeStep  time.Duration // wake section: the mid-turn lead's step, from the done's exec

	burstProfile string // CPU profile of this process (lead loop, broker, launcher) from the burst's launch to its last harvest
}

func (o options) has(section string) bool {
	for _, s := range strings.Split(o.sections, ",") {
		if strings.TrimSpace(s) == section || s == "all" {
			return true
		}
	}
	return false
}

// hasExplicit says whether section was named in -sections: "all" leaves it
// out (the scale section is long, and CI's -smoke runs "all").
func (o options) hasExplicit(section string) bool {
	for _, s := range strings.Split(o.sections, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 200, "timed runs of each case")
	flag.IntVar(&o.warmup, "warmup", defaultWarmup, "warm-up rounds before the timed ones (not counted)")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "file whose orch-notify section is (re)written; - prints the section")
	flag.StringVar(&o.raw, "raw", "", "also write every timed sample as CSV (round,position,case,ns) to this file")
	flag.BoolVar(&o.verbose, "v", false, "copy the lead loop's log to stderr")
	flag.StringVar(&o.sections, "sections", "all", "what to measure: all, or a comma-separated list of startup, reaction, burst, serve, wake, scale (scale only when named: see scale.go)")
	flag.IntVar(&o.reactionN, "reaction-n", 200, "reaction rounds of each kind (in-process publish, orch-notify process)")
	flag.IntVar(&o.burst, "burst", 1000, "plans (and cat worker panes) in the burst: one orch-notify done each, launched at once")
	flag.IntVar(&o.conc, "conc", 4*runtime.NumCPU(), "orch-notify processes running at a time in the burst")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "idle window for orch serve and the bare broker")
	flag.IntVar(&o.wakeN, "wake-n", 200, "wake rounds of each kind (idle lead, mid-turn lead); each idle round also times one tmux send-keys")
	flag.DurationVar(&o.wakeStep, "wake-step", 250*time.Millisecond, "wake section: the mid-turn lead's steps come this long after the done's exec, and as often after")
	flag.IntVar(&o.plans, "plans", 1000, "plans run through orch serve's 8 workers before its memory is read again")
	flag.StringVar(&o.burstProfile, "burst-cpuprofile", "", "write a CPU profile of the bench process (lead loop, broker, launcher) during the burst to this file (go tool pprof); "+
		"the burst's CPU figures then include the profiler's own small cost")
	flag.BoolVar(&o.smoke, "smoke", false, "tiny run for CI (5 start-up rounds, 20-plan burst, 3 s idle, 20 plans, 20 reaction rounds, 3 wake rounds); "+
		"prints the section instead of writing it unless -out is given; exits 1 if anything is lost or doubled")
	bare := flag.String("bare-server", "", "internal: run only the embedded broker on this directory until stdin closes (the idle baseline)")
	flag.Parse()
	if *bare != "" {
		if err := bareServer(*bare); err != nil {
			fmt.Fprintf(os.Stderr, "bench -bare-server: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.smoke {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		o.reactionN, o.burst, o.idle, o.plans, o.warmup, o.wakeN = 20, 20, 3*time.Second, 20, 2, 3
		if !set["n"] {
			o.n = 5
		}
		if !set["out"] {
			o.out = "-"
		}
	}
	if flag.NArg() != 0 || o.n < 1 || o.warmup < 0 || o.reactionN < 1 || o.burst < 1 || o.conc < 1 || o.plans < 1 || o.idle <= 0 || o.wakeN < 1 || o.wakeStep <= 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench [-n 200] [-warmup 5] [-sections all] [-reaction-n 200] [-burst 1000] [-conc 4*nproc] "+
			"[-idle 30s] [-plans 1000] [-wake-n 200] [-wake-step 250ms] [-smoke] [-out BENCHMARKS.md] [-raw samples.csv] [-v]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "orch-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	m := machineInfo(ctx, root)
	logf("machine: %s, %s CPUs, %s", m.CPU, m.NProc, m.Go)

	logf("building into %s", tmp)
	bins, err := buildAll(ctx, root, tmp, o.has("startup"))
	if err != nil {
		return err
	}
	for _, b := range bins.list() {
		logf("  %-34s %9d bytes  %5.2f MiB  %s", b.Label, b.Size, mib(b.Size), b.Link)
	}
	code, err := codeByModule(ctx, root, bins.full.Path)
	if err != nil {
		logf("code size by module: %v (left out of the report)", err)
	}

	var sections []sectionOut
	if o.has("startup") {
		res, err := startup(ctx, o, bins, tmp)
		if err != nil {
			return err
		}
		it, err := initTrace(ctx, bins.full.Path, min(o.n, 50))
		if err != nil {
			logf("inittrace: %v (left out of the report)", err)
		}
		sections = append(sections, sectionOut{markBegin, markEnd, report(reportData{
			Machine: m, N: o.n, Warmup: o.warmup, Bins: bins, Startup: res, Code: code, Init: it,
		})})
	}
	ld := leadData{Machine: m, O: o}
	if o.has("reaction") {
		logf("reaction: %d rounds of each kind", o.reactionN)
		ld.Load = loadAvg()
		r, err := reaction(ctx, o, bins.full.Path, filepath.Join(tmp, "reaction"))
		if err != nil {
			return fmt.Errorf("reaction: %w", err)
		}
		ld.Reaction = &r
	}
	if o.has("burst") {
		ld.BurstLoad = loadAvg()
		b, err := burst(ctx, o, bins.full.Path, tmp)
		if err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		ld.Burst = &b
	}
	if o.has("serve") {
		ld.ServeLoad = loadAvg()
		s, err := serveBench(ctx, o, root, tmp)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		ld.Serve = &s
	}
	var wakeText string
	if o.has("wake") {
		w, err := wake(ctx, o, root, tmp)
		if err != nil {
			return fmt.Errorf("wake: %w", err)
		}
		wakeText = wakeReport(m, o, w)
	}
	if o.hasExplicit("scale") {
		// Printed, never written into BENCHMARKS.md: SCALING.md reads it by hand.
		text, err := scale(ctx, o, tmp)
		fmt.Print(text)
		if err != nil {
			return fmt.Errorf("scale: %w", err)
		}
	}
	if ld.Reaction != nil || ld.Burst != nil || ld.Serve != nil {
		sections = append(sections, sectionOut{leadBegin, leadEnd, leadReport(ld)})
	}
	if wakeText != "" {
		sections = append(sections, sectionOut{wakeBegin, wakeEnd, wakeText})
	}
	for _, sec := range sections {
		if o.out == "-" {
			fmt.Print(sec.text)
			continue
		}
		if err := writeMarked(o.out, sec.text, sec.begin, sec.end); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	if b := ld.Burst; b != nil && (b.Lost > 0 || b.Doubled > 0 || b.ExitNonZero > 0) {
		return fmt.Errorf("burst: %d lost, %d doubled, %d orch-notify failed: %s %s", b.Lost, b.Doubled, b.ExitNonZero,
			strings.Join(first(b.LostWhy, 5), "; "), strings.Join(first(b.DoubledWhy, 5), "; "))
	}
	if s := ld.Serve; s != nil && s.Refused > 0 {
		return fmt.Errorf("serve: %d events refused", s.Refused)
	}
	return nil
}

// sectionOut is one generated section of BENCHMARKS.md and its markers.
type sectionOut struct{ begin, end, text string }

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
