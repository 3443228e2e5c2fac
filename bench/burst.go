package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/logfmt"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/lead"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// planNames are the burst's plans, p0001 ... pN.
func planNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%04d", i+1)
	}
	return names
}

// makeRepo is a scratch repo made by orch init, with the plans written and
// committed in one commit (orch plan new would make one commit per plan,
// which is setup time, not what is measured), and a RESULT.md in each plan
// folder, as a worker leaves it before its last step.
func makeRepo(ctx context.Context, dir string, names []string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	res, err := orchctl.Init(ctx, dir)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if err := plans.Write(res.Root, &plans.Plan{Name: n, Body: "A plan for go run ./bench: write RESULT.md, then orch-notify done " + n + " ok.\n"}); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{{"add", "plans"}, {"-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "bench plans"}} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = res.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, n := range names {
		if err := os.WriteFile(plans.ResultPath(res.Root, n), []byte("# "+n+"\n\nok\n"), 0o644); err != nil {
			return "", err
		}
	}
	return res.Root, nil
}

// startWideTmux starts a private tmux server whose new sessions get a
// 1000x1000 window. orch makes its fleet's session 200x50 and splits it
// once per worker; a thousand panes do not fit in 200x50, so a global
// session-created hook enlarges the window first. The placeholder session
// keeps the server up until the lead loop makes its own.
func startWideTmux(ctx context.Context, socket string) error {
	for _, args := range [][]string{
		{"-L", socket, "-f", os.DevNull, "new-session", "-d", "-s", "bench-keep", "cat"},
		{"-L", socket, "set-hook", "-g", "session-created", "resize-window -x 1000 -y 1000"},
	} {
		if out, err := exec.CommandContext(ctx, "tmux", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// fleetLead is a lead loop in this process with one cat pane per plan.
type fleetLead struct {
	root, orchDir, url, socket string
	tap                        *logTap
	stop                       context.CancelFunc
	errc                       chan error
	closed                     sync.Once
}

func startFleetLead(ctx context.Context, root, socket string, workers int, verbose bool) (*fleetLead, error) {
	f := &fleetLead{root: root, orchDir: orchdir.Of(root), socket: socket}
	if err := startWideTmux(ctx, socket); err != nil {
		killTmux(socket)
		return nil, err
	}
	var inner slog.Handler
	if verbose {
		inner = logfmt.NewLineHandler(os.Stderr, slog.LevelInfo)
	}
	f.tap = newLogTap(inner)
	loopCtx, stop := context.WithCancel(ctx)
	f.stop, f.errc = stop, make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		f.errc <- lead.Run(loopCtx, lead.Config{
			Root: root, Workers: workers, Agent: "cat", TmuxSocket: socket,
			// Shared isolation: the bench writes each RESULT.md in the repo,
			// and 1000 worktrees would measure git checkouts, not the loop.
			Isolation: "shared",
			Logger:    slog.New(f.tap),
			Ready:     func(url string) { ready <- url },
			// cat never says "started": without this every plan would be
			// re-sent, then failed, two minutes after its dispatch.
			AckTimeout: -1,
		})
	}()
	// Bringing up the fleet is six tmux commands per pane.
	timer := time.NewTimer(time.Minute + time.Duration(workers)*100*time.Millisecond)
	defer timer.Stop()
	for {
		select {
		case f.url = <-ready:
			return f, nil
		case r := <-f.tap.ch:
			// Worker lines while the fleet comes up; nothing to wait for in them.
			_ = r
		case err := <-f.errc:
			f.errc <- err
			f.close()
			return nil, fmt.Errorf("lead loop: %w", err)
		case <-timer.C:
			f.close()
			return nil, errors.New("lead loop with its fleet not ready in time")
		case <-ctx.Done():
			f.close()
			return nil, ctx.Err()
		}
	}
}

// close stops the loop and the fleet; it may be called more than once.
func (f *fleetLead) close() {
	f.closed.Do(func() {
		f.stop()
		<-f.errc
		killTmux(f.socket)
	})
}

func (f *fleetLead) env(worker string) []string {
	return workerEnv(f.url, f.orchDir, worker, event.DefaultPrefix)
}

// dispatchAll publishes one dispatch command per plan, as orch dispatch
// does after its checks (orch dispatch itself parses every plan to check
// the graph, N times over; that is setup, not what is measured), and
// returns the worker each plan was typed to, from the loop's log.
func (f *fleetLead) dispatchAll(ctx context.Context, names []string) (map[string]string, error) {
	cfg, err := notify.LeadConfig(f.orchDir)
	if err != nil {
		return nil, err
	}
	nc, err := notify.Connect(cfg, "bench-dispatch")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	f.tap.drain()
	for _, n := range names {
		if _, _, err := notify.PublishOn(nc, cfg.Prefix, event.New(event.Dispatch, n, "", "", ""), 5*time.Second); err != nil {
			return nil, fmt.Errorf("dispatch %s: %w", n, err)
		}
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	holder := map[string]string{}
	for len(holder) < len(names) {
		r, err := f.tap.waitFor(ctx, 2*time.Minute, "dispatched", func(r logRec) bool {
			return want[r.Attrs["plan"]] && (r.Msg == "dispatched" || r.Msg == "refused" || strings.HasPrefix(r.Msg, "dispatch failed"))
		})
		if err != nil {
			return nil, fmt.Errorf("%w (%d of %d dispatched)", err, len(holder), len(names))
		}
		if r.Msg != "dispatched" {
			return nil, fmt.Errorf("dispatch of %s: %s %v", r.Attrs["plan"], r.Msg, r.Attrs)
		}
		holder[r.Attrs["plan"]] = r.Attrs["worker"]
	}
	return holder, nil
}

type burstResult struct {
	N, Conc                       int
	FleetUp, DispatchAll          time.Duration // setup, untimed in the figures
	AllAcked, AllHarvested        time.Duration // from the first launch
	FirstHarvest                  time.Duration
	NotifyWall                    dist // each orch-notify, exec to exit, under the burst
	ExitNonZero, Spooled          int
	Harvested                     int
	HarvestLines                  int     // "harvested" and "harvested together" log lines
	Batches, Batched, MaxBatch    int     // batch lines (two plans or more), the plans in them, the largest
	Throughput, SteadyThroughput  float64 // plans/s: N over all-harvested; (N-1) over first-to-last harvest
	IntervalFirst, IntervalLast   dist    // time between consecutive harvests, first and last tenth
	HarvestCommits, LedgerCommits int
	LedgerEntries, Callbacks      int
	NotDone                       int
	Lost, Doubled                 int
	LostWhy, DoubledWhy           []string
	SelfCPU, ChildCPU             time.Duration // this process (the lead loop) and its reaped children, launch to all harvested
	RecentTrailersEnd             dist          // RecentTrailers over the last 200 commits (the harvest's crash check), on the final history
	GitFloor                      dist          // git rev-parse HEAD on the same repo: one git process
	Commits                       int
	StateBytes                    int64
}

func burst(ctx context.Context, o options, notifyBin, dir string) (burstResult, error) {
	res := burstResult{N: o.burst, Conc: o.conc}
	names := planNames(o.burst)
	root, err := makeRepo(ctx, filepath.Join(dir, "burst"), names)
	if err != nil {
		return res, err
	}
	logf("burst: bringing up %d cat panes", o.burst)
	t := time.Now()
	fl, err := startFleetLead(ctx, root, fmt.Sprintf("orch-bench-%d-burst", os.Getpid()), o.burst, o.verbose)
	if err != nil {
		return res, err
	}
	defer fl.close()
	res.FleetUp = time.Since(t)
	t = time.Now()
	holder, err := fl.dispatchAll(ctx, names)
	if err != nil {
		return res, err
	}
	res.DispatchAll = time.Since(t)
	logf("burst: fleet up in %.1f s, %d plans dispatched in %.1f s", res.FleetUp.Seconds(), len(holder), res.DispatchAll.Seconds())

	cfg, err := notify.LeadConfig(fl.orchDir)
	if err != nil {
		return res, err
	}
	lc, err := notify.Connect(cfg, "bench-callbacks")
	if err != nil {
		return res, err
	}
	defer lc.Close()
	var mu sync.Mutex
	cbPerPlan := map[string]int{}
	sub, err := lc.Subscribe(cfg.Prefix+".cb.>", func(m *nats.Msg) {
		if cb, err := event.ParseCallback(m.Data); err == nil {
			mu.Lock()
			cbPerPlan[cb.Plan]++
			mu.Unlock()
		}
	})
	if err != nil {
		return res, err
	}
	defer sub.Unsubscribe()
	if err := lc.Flush(); err != nil {
		return res, err
	}

	type exit struct {
		at, wall time.Duration
		code     int
		spooled  bool
		msg      string
	}
	exits := make(chan exit, len(names))
	fl.tap.drain()
	var ru0, rc0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc0)
	sem := make(chan struct{}, o.conc)
	if o.burstProfile != "" {
		f, err := os.Create(o.burstProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile() // also on the early returns; the normal path stops it at the last harvest
	}
	t0 := time.Now()
	go func() {
		for _, n := range names {
			sem <- struct{}{}
			go func(n string) {
				defer func() { <-sem }()
				cmd := exec.Command(notifyBin, "done", n, "ok")
				cmd.Env, cmd.Dir = fl.env(holder[n]), root
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				s := time.Now()
				err := cmd.Run()
				e := exit{at: time.Since(t0), wall: time.Since(s)}
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					e.code = ee.ExitCode()
				} else if err != nil {
					e.code = -1
				}
				e.msg = strings.TrimSpace(stderr.String())
				e.spooled = strings.Contains(e.msg, "spool")
				exits <- e
			}(n)
		}
	}()
	var harvestAt []time.Duration
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	deadline := time.NewTimer(10 * time.Minute) // a deadline for a stuck loop, not a poll
	defer deadline.Stop()
	var walls []time.Duration
	nExits := 0
	for len(harvestAt) < len(names) || nExits < len(names) {
		select {
		case e := <-exits:
			nExits++
			walls = append(walls, e.wall)
			res.AllAcked = max(res.AllAcked, e.at)
			if e.code != 0 {
				res.ExitNonZero++
				if res.ExitNonZero <= 3 {
					logf("burst: orch-notify exit %d: %s", e.code, e.msg)
				}
			} else if e.spooled {
				res.Spooled++
			}
		case r := <-fl.tap.ch:
			if hp := harvestedPlans(r.Msg, r.Attrs); len(hp) > 0 {
				// One line per plan, or one line for a batch: every plan in
				// it was committed at that moment.
				n := 0
				for _, p := range hp {
					if want[p] {
						harvestAt = append(harvestAt, r.At.Sub(t0))
						n++
						if len(harvestAt)%200 == 0 {
							logf("burst: %d/%d harvested", len(harvestAt), len(names))
						}
					}
				}
				if n > 0 {
					res.HarvestLines++
					res.MaxBatch = max(res.MaxBatch, n)
					if n > 1 {
						res.Batches++
						res.Batched += n
					}
				}
				continue
			}
			if !want[r.Attrs["plan"]] {
				continue
			}
			if r.Msg == "refused" || strings.HasPrefix(r.Msg, "done without") || strings.HasPrefix(r.Msg, "event not handled") || strings.HasPrefix(r.Msg, "batch harvest not") {
				logf("burst: %s %v", r.Msg, r.Attrs)
			}
		case <-deadline.C:
			return res, fmt.Errorf("burst: %d of %d harvested, %d of %d orch-notify exited after 10 minutes", len(harvestAt), len(names), nExits, len(names))
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	if o.burstProfile != "" {
		pprof.StopCPUProfile()
	}
	var ru1, rc1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc1)
	res.SelfCPU = cpuOf(ru1) - cpuOf(ru0)
	res.ChildCPU = cpuOf(rc1) - cpuOf(rc0)
	sort.Slice(harvestAt, func(i, j int) bool { return harvestAt[i] < harvestAt[j] })
	res.Harvested = len(harvestAt)
	res.NotifyWall = distOf(walls)
	res.FirstHarvest, res.AllHarvested = harvestAt[0], harvestAt[len(harvestAt)-1]
	res.Throughput = float64(len(harvestAt)) / res.AllHarvested.Seconds()
	if len(harvestAt) > 1 {
		res.SteadyThroughput = float64(len(harvestAt)-1) / (res.AllHarvested - res.FirstHarvest).Seconds()
		var iv []time.Duration
		for i := 1; i < len(harvestAt); i++ {
			iv = append(iv, harvestAt[i]-harvestAt[i-1])
		}
		tenth := max(1, len(iv)/10)
		res.IntervalFirst, res.IntervalLast = distOf(iv[:tenth]), distOf(iv[len(iv)-tenth:])
	}
	logf("burst: all %d exited after %.2f s, all harvested after %.2f s", len(names), res.AllAcked.Seconds(), res.AllHarvested.Seconds())

	// The callback for the last harvest is published right after its log
	// line; a flush round trip on the subscriber's connection orders it.
	if err := lc.Flush(); err != nil {
		return res, err
	}
	fl.close()
	mu.Lock()
	defer mu.Unlock()
	if err := res.count(ctx, root, names, cbPerPlan); err != nil {
		return res, err
	}
	res.profile(ctx, root)
	return res, nil
}

func cpuOf(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// count checks every plan in the record, the git history, the ledger and
// the callbacks: lost is a plan missing from any of them, doubled a plan
// found more than once in any. It reads no commit subjects: per plan, the
// commits touching plans/<plan>/RESULT.md, the Orch-Ledger-Event trailers
// naming the event of its ledger entry, its "type":"entry" lines in
// LEDGER.jsonl (on disk and as committed) and its callbacks; so single and
// batched harvests count the same.
func (res *burstResult) count(ctx context.Context, root string, names []string, cbPerPlan map[string]int) error {
	st, err := orchctl.Status(root)
	if err != nil {
		return err
	}
	states := map[string]state.PlanState{}
	for _, p := range st.Plans {
		states[p.Name] = p.State
	}
	// Every commit, newest first: its Orch-Ledger-Event trailers, then the
	// files it touched. A harvest commit is one touching a RESULT.md, alone
	// ("harvest X: ok") or in a batch ("harvest N plans: ..."); a ledger
	// commit one with Orch-Ledger-Event trailers, one per event it records.
	cmd := exec.CommandContext(ctx, "git", "log", "--format=%x1e%(trailers:key="+harvest.TrailerLedger+",valueonly,separator=%x1f)%x1d", "--name-only")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git log: %w", err)
	}
	resultOf := map[string]string{} // plans/<plan>/RESULT.md -> plan
	for _, n := range names {
		resultOf[plans.RelResultPath(n)] = n
	}
	harvests, ledgerTrailers := map[string]int{}, map[string]int{} // per plan; per event id
	for _, rec := range strings.Split(string(out), "\x1e") {
		trailers, files, ok := strings.Cut(rec, "\x1d")
		if !ok {
			continue
		}
		res.Commits++
		touched := false
		for _, f := range strings.Split(files, "\n") {
			if n, ok := resultOf[strings.TrimSpace(f)]; ok {
				harvests[n]++
				touched = true
			}
		}
		if touched {
			res.HarvestCommits++
		}
		if trailers = strings.TrimSpace(trailers); trailers != "" {
			res.LedgerCommits++
			for _, id := range strings.Split(trailers, "\x1f") {
				ledgerTrailers[strings.TrimSpace(id)]++
			}
		}
	}
	// Ledger entries as committed (HEAD), and as on disk: a line on disk
	// that HEAD lacks is a ledger entry never committed.
	onDisk, err := os.ReadFile(filepath.Join(root, ledger.File))
	if err != nil {
		return err
	}
	entries, eventOf, err := ledgerEntries(bytes.NewReader(onDisk))
	if err != nil {
		return err
	}
	cmd = exec.CommandContext(ctx, "git", "show", "HEAD:"+ledger.File)
	cmd.Dir = root
	head, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git show HEAD:%s: %w", ledger.File, err)
	}
	committed, _, err := ledgerEntries(bytes.NewReader(head))
	if err != nil {
		return err
	}
	ledgers := map[string]int{} // ledger-commit trailers per plan, through the event id its entries name
	for n, ids := range eventOf {
		for _, id := range ids {
			ledgers[n] += ledgerTrailers[id]
		}
	}
	for _, n := range names {
		res.LedgerEntries += entries[n]
	}
	for _, n := range names {
		res.Callbacks += cbPerPlan[n]
		var lost, doubled []string
		if states[n] != state.PlanDone {
			res.NotDone++
			lost = append(lost, "state "+string(states[n]))
		}
		for _, c := range []struct {
			what string
			n    int
		}{{"harvest commits", harvests[n]}, {"ledger commits", ledgers[n]}, {"ledger entries", entries[n]}, {"committed ledger entries", committed[n]}, {"callbacks", cbPerPlan[n]}} {
			if c.n == 0 {
				lost = append(lost, "no "+c.what)
			} else if c.n > 1 {
				doubled = append(doubled, fmt.Sprintf("%d %s", c.n, c.what))
			}
		}
		if len(lost) > 0 {
			res.Lost++
			res.LostWhy = append(res.LostWhy, n+": "+strings.Join(lost, ", "))
		}
		if len(doubled) > 0 {
			res.Doubled++
			res.DoubledWhy = append(res.DoubledWhy, n+": "+strings.Join(doubled, ", "))
		}
	}
	return nil
}

// profile times, on the burst's final history, the harvest's crash check
// (RecentTrailers: the Orch-Event trailers of the last 200 commits) against
// the floor of one git process.
func (res *burstResult) profile(ctx context.Context, root string) {
	repo, err := git.Open(ctx, root)
	if err != nil {
		return
	}
	var ft, floor []time.Duration
	for i := 0; i < 15; i++ {
		t := time.Now()
		if _, err := repo.RecentTrailers(ctx, harvest.TrailerEvent, 200); err != nil {
			return
		}
		ft = append(ft, time.Since(t))
		t = time.Now()
		if _, err := repo.Head(ctx); err != nil {
			return
		}
		floor = append(floor, time.Since(t))
	}
	res.RecentTrailersEnd, res.GitFloor = distOf(ft), distOf(floor)
	if fi, err := os.Stat(filepath.Join(orchdir.Of(root), orchdir.State)); err == nil {
		res.StateBytes = fi.Size()
	}
}

// ledgerEntries counts the "type":"entry" lines of a LEDGER.jsonl per plan
// (settlements and check records are other types), with the event ids they
// name.
func ledgerEntries(f io.Reader) (map[string]int, map[string][]string, error) {
	count, events := map[string]int{}, map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var en struct {
			Type  string `json:"type"`
			Plan  string `json:"plan"`
			Event string `json:"event"`
		}
		if json.Unmarshal(sc.Bytes(), &en) == nil && en.Type == "entry" && en.Plan != "" {
			count[en.Plan]++
			if en.Event != "" {
				events[en.Plan] = append(events[en.Plan], en.Event)
			}
		}
	}
	return count, events, sc.Err()
}
