package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
)

// benchCase is one command timed from exec to exit.
type benchCase struct {
	Key     string // short name used in ratios
	Label   string
	Cmdline string // as shown in the report

	path     string
	args     []string
	env      []string
	dir      string
	wantExit int
	prep     func(context.Context) error // untimed, before each run
	settle   func(context.Context) error // untimed, after each run

	samples   []time.Duration
	afterDone []bool // the sample was taken right after a run of (c) or (c') in the same round
}

// Case keys, used by the report.
const (
	keyEmpty    = "empty"
	keyBadArgs  = "badargs"
	keyBadCgo   = "badargscgo"
	keyDone     = "done"
	keyDoneCgo  = "donecgo"
	keyDoneBare = "donebare"
	keySendKeys = "sendkeys"
)

// isDone says whether a case key is one of the two done cases, (c) and (c').
func isDone(key string) bool { return key == keyDone || key == keyDoneCgo }

// badArgs is an unknown event kind: orch-notify parses its arguments,
// prints the usage line and exits 2 before it reads any file or dials.
var badArgs = []string{"nonsense", benchPlan}

// stats summarises one case's samples.
type stats struct {
	Key, Label, Cmdline       string
	N                         int
	Min, Med, P95, P99, Max   time.Duration
	RatioSendKeys, RatioEmpty float64 // median over the send-keys / empty binary median

	// The median of the runs that came right after a run of (c), while the
	// lead loop may still be finishing that event, and of the others.
	NAfterDone                 int
	MedAfterDone, MedOtherwise time.Duration
}

type startupResult struct {
	Cases    []stats
	Rounds   int
	Accepted int
	Refused  map[string]int
	Wall     time.Duration
	Load     string // load average when the timed rounds began
	LoadEnd  string // and when they ended
}

func (r startupResult) byKey(k string) stats {
	for _, s := range r.Cases {
		if s.Key == k {
			return s
		}
	}
	return stats{}
}

func startup(ctx context.Context, o options, bins binaries, dir string) (startupResult, error) {
	var res startupResult
	tmuxPath, err := exec.LookPath("tmux")
	if err != nil {
		return res, errors.New("tmux is not on PATH: the send-keys case and the lead loop's worker pane need it")
	}
	logf("starting a lead loop (lead.Run, 1 worker running cat) on a scratch repo")
	sl, err := startLead(ctx, dir, fmt.Sprintf("orch-bench-%d", os.Getpid()), o.verbose)
	if err != nil {
		return res, err
	}
	defer sl.close()
	kp, err := startKeysPane(ctx, dir)
	if err != nil {
		return res, fmt.Errorf("send-keys target: %w", err)
	}
	defer kp.close()

	// A bare broker, configured as orch serve's (stream, consumers,
	// credentials) but alone in its own process with no lead loop reading
	// it: (c'') against it is orch-notify without a harvest running on the
	// same CPUs at the moment of its ack.
	bareDir := filepath.Join(dir, "bare-broker")
	bare, err := startBare(ctx, bareDir)
	if err != nil {
		return res, err
	}
	defer bare.stop()
	bareEnv := workerEnv(bare.url, bareDir, benchWorker, event.DefaultPrefix)

	env := cleanEnv()
	cases := []*benchCase{
		{Key: keyEmpty, Label: "(a) empty Go binary", Cmdline: "empty", path: bins.empty.Path, env: env, dir: sl.root},
		{Key: keyBadArgs, Label: "(b) orch-notify, bad arguments", Cmdline: "orch-notify " + strings.Join(badArgs, " ") + "  (exit 2)",
			path: bins.full.Path, args: badArgs, env: sl.notifyEnv(), dir: sl.root, wantExit: 2},
		{Key: keyBadCgo, Label: "(b') same, cgo build", Cmdline: "orch-notify-cgo " + strings.Join(badArgs, " ") + "  (exit 2)",
			path: bins.cgo.Path, args: badArgs, env: sl.notifyEnv(), dir: sl.root, wantExit: 2},
		{Key: keyDone, Label: "(c) orch-notify done, acked", Cmdline: "orch-notify done " + benchPlan + " ok",
			path: bins.full.Path, args: []string{"done", benchPlan, "ok"}, env: sl.notifyEnv(), dir: sl.root,
			prep: sl.prepDone, settle: sl.settleDone},
		{Key: keyDoneCgo, Label: "(c') same, cgo build", Cmdline: "orch-notify-cgo done " + benchPlan + " ok",
			path: bins.cgo.Path, args: []string{"done", benchPlan, "ok"}, env: sl.notifyEnv(), dir: sl.root,
			prep: sl.prepDone, settle: sl.settleDone},
		{Key: keyDoneBare, Label: "(c'') (c) against a bare broker", Cmdline: "orch-notify done " + benchPlan + " ok  (no lead loop reading)",
			path: bins.full.Path, args: []string{"done", benchPlan, "ok"}, env: bareEnv, dir: sl.root},
		{Key: keySendKeys, Label: "(d) tmux send-keys", Cmdline: "tmux -L <private> send-keys -t " + kp.pane + " 'WORKER-DONE x: ok' Enter",
			path: tmuxPath, args: []string{"-L", kp.socket, "send-keys", "-t", kp.pane, "WORKER-DONE x: ok", "Enter"}, env: env, dir: sl.root},
	}
	if bins.cgo.Path == "" {
		cases = slices.DeleteFunc(cases, func(c *benchCase) bool { return c.path == "" })
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return res, err
	}
	defer devnull.Close()

	var raw *bufio.Writer
	if o.raw != "" {
		f, err := os.Create(o.raw)
		if err != nil {
			return res, err
		}
		defer f.Close()
		raw = bufio.NewWriter(f)
		defer raw.Flush()
		fmt.Fprintln(raw, "round,position,case,ns")
	}

	rng := rand.New(rand.NewPCG(1, 2))
	rounds := o.warmup + o.n
	var start time.Time
	for r := 0; r < rounds; r++ {
		if r == o.warmup {
			sl.resetCounts()
			for _, c := range cases {
				c.samples, c.afterDone = c.samples[:0], c.afterDone[:0]
			}
			res.Load = loadAvg()
			if l1, err := strconv.ParseFloat(strings.Fields(res.Load)[0], 64); err == nil && l1 > float64(runtime.NumCPU())/2 {
				logf("warning: load average %s before the timed rounds: something else is running, the figures will be noisy", res.Load)
			}
			start = time.Now()
		}
		// A new order every round, so that no case always runs first or
		// always follows the same one (and inherits its cache, scheduler or
		// lead-loop state). The seed is fixed: a rerun uses the same orders.
		prev := ""
		for i, k := range rng.Perm(len(cases)) {
			c := cases[k]
			d, err := c.once(ctx, devnull)
			if err != nil {
				return res, fmt.Errorf("round %d, %s: %w", r+1, c.Label, err)
			}
			c.samples = append(c.samples, d)
			c.afterDone = append(c.afterDone, isDone(prev))
			prev = c.Key
			if raw != nil && r >= o.warmup {
				fmt.Fprintf(raw, "%d,%d,%s,%d\n", r-o.warmup+1, i+1, c.Key, d.Nanoseconds())
			}
		}
		if done := r + 1 - o.warmup; done > 0 && (done%50 == 0 || done == o.n) {
			logf("  %d/%d rounds", done, o.n)
		}
	}
	res.Wall = time.Since(start)
	res.LoadEnd = loadAvg()
	res.Rounds = o.n
	res.Accepted, res.Refused = sl.accepted, sl.refused
	// orch-notify exits 0 for an event it spooled as well as for one the
	// broker acked: no timed done may have been spooled. (c'') has no lead
	// loop, so its spool directory must still be empty.
	if spooled, _ := os.ReadDir(filepath.Join(bareDir, orchdir.Spool)); len(spooled) > 0 {
		return res, fmt.Errorf("(c''): %d events spooled instead of acked by the bare broker, e.g. %s", len(spooled), spooled[0].Name())
	}
	if sl.spooled > 0 {
		return res, fmt.Errorf("(c), (c'): %d done events reached the lead loop from the spool, not through an ack", sl.spooled)
	}

	for _, c := range cases {
		res.Cases = append(res.Cases, summarise(c))
	}
	sk, em := res.byKey(keySendKeys).Med, res.byKey(keyEmpty).Med
	for i := range res.Cases {
		res.Cases[i].RatioSendKeys = float64(res.Cases[i].Med) / float64(sk)
		res.Cases[i].RatioEmpty = float64(res.Cases[i].Med) / float64(em)
	}
	return res, nil
}

// once runs the case one time and returns the wall time from just before
// the fork/exec to just after the child has been reaped.
func (c *benchCase) once(ctx context.Context, devnull *os.File) (time.Duration, error) {
	if c.prep != nil {
		if err := c.prep(ctx); err != nil {
			return 0, fmt.Errorf("prepare: %w", err)
		}
	}
	// *os.File for all three streams: os/exec then starts no copying
	// goroutines, and every case pays the same exec overhead.
	cmd := exec.Command(c.path, c.args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return 0, err
	}
	if code != c.wantExit {
		again := exec.Command(c.path, c.args...)
		again.Env, again.Dir = c.env, c.dir
		out, _ := again.CombinedOutput()
		return 0, fmt.Errorf("exit %d, want %d; a second run says: %s", code, c.wantExit, strings.TrimSpace(string(out)))
	}
	if c.settle != nil {
		if err := c.settle(ctx); err != nil {
			return 0, fmt.Errorf("settle: %w", err)
		}
	}
	return d, nil
}

func summarise(c *benchCase) stats {
	s := append([]time.Duration(nil), c.samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	st := stats{
		N: len(s), Min: s[0], Max: s[len(s)-1],
		Med: percentile(s, 500), P95: percentile(s, 950), P99: percentile(s, 990),
		Key: c.Key, Label: c.Label, Cmdline: c.Cmdline,
	}
	var after, other []time.Duration
	for i, d := range c.samples {
		if c.afterDone[i] {
			after = append(after, d)
		} else {
			other = append(other, d)
		}
	}
	st.NAfterDone = len(after)
	if len(after) > 0 && len(other) > 0 {
		st.MedAfterDone, st.MedOtherwise = median(after), median(other)
	}
	return st
}

// percentile is the nearest-rank percentile of sorted samples: the smallest
// sample with at least permille/1000 of all samples at or below it (with 200
// samples: p50 is the 100th, p95 the 190th, p99 the 198th).
func percentile(sorted []time.Duration, permille int) time.Duration {
	rank := (permille*len(sorted) + 999) / 1000
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
