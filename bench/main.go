// Command bench measures orch-notify, the worker's notifier: its size and
// its start-up, against an empty Go binary and against the tmux send-keys
// line it replaces, and writes the figures into BENCHMARKS.md.
//
// README: go run ./bench [-n 200] [-out BENCHMARKS.md] [-raw samples.csv]   (from the repo root; needs go, git and tmux)
//
// What it does, in order:
//
//  1. builds orch-notify stripped (-ldflags='-s -w' -trimpath), unstripped
//     (plain go build, as .ci/run does), stripped with CGO_ENABLED=0, and an
//     empty Go binary (package main; func main(){}) stripped, into a
//     temporary directory, and reports their sizes;
//  2. times exec to exit, n runs of each case, interleaved (every round runs
//     each case once, in an order shuffled anew every round, after a few
//     warm-up rounds that are not counted): the empty binary; orch-notify
//     with bad arguments (start-up and argument parsing, exit 2); the same
//     with the static build; orch-notify done <plan> against a real lead
//     loop (lead.Run in this process, a scratch repo, one tmux worker running
//     cat, the plan dispatched to it before each run so that every done is
//     accepted and harvested); and tmux send-keys of a WORKER-DONE line into
//     a pane running cat on a private tmux server;
//  3. runs orch-notify with GODEBUG=inittrace=1 to rank its packages' init
//     cost, and attributes its code size to modules with go tool nm;
//  4. writes its section of BENCHMARKS.md between marker comments, leaving
//     the rest of the file as it is (or prints it with -out -).
//
// It is a command, not a test: go test ./... never runs it. A new case is
// one more entry in the list in startup.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const defaultWarmup = 5

type options struct {
	n       int
	warmup  int
	out     string
	raw     string
	verbose bool
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 200, "timed runs of each case")
	flag.IntVar(&o.warmup, "warmup", defaultWarmup, "warm-up rounds before the timed ones (not counted)")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "file whose orch-notify section is (re)written; - prints the section")
	flag.StringVar(&o.raw, "raw", "", "also write every timed sample as CSV (round,position,case,ns) to this file")
	flag.BoolVar(&o.verbose, "v", false, "copy the lead loop's log to stderr")
	flag.Parse()
	if flag.NArg() != 0 || o.n < 1 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench [-n 200] [-warmup 5] [-out BENCHMARKS.md] [-raw samples.csv] [-v]")
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
	bins, err := buildAll(ctx, root, tmp)
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

	res, err := startup(ctx, o, bins, tmp)
	if err != nil {
		return err
	}
	it, err := initTrace(ctx, bins.stripped.Path, min(o.n, 50))
	if err != nil {
		logf("inittrace: %v (left out of the report)", err)
	}

	section := report(reportData{
		Machine: m, N: o.n, Warmup: o.warmup, Bins: bins, Startup: res, Code: code, Init: it,
	})
	if o.out == "-" {
		fmt.Print(section)
		return nil
	}
	if err := writeSection(o.out, section); err != nil {
		return err
	}
	logf("wrote %s", o.out)
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
