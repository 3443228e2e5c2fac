package main

// The scale section (-sections scale; never part of "all", it is long and
// CI does not need it): how far one lead loop goes on this machine.
//
//  1. rate: a lead loop in this process with 8 cat workers, each holding a
//     running plan; cheap events (started, which the loop checks, records
//     as handled, saves and acks without a git process) are published at a
//     ramp of rates from open worker connections; after each step the lead
//     consumer's backlog (unacked + pending, from the stream's own
//     accounting) says whether the loop kept up. The ramp stops at the
//     first step whose backlog is over a quarter of what it published.
//  2. workers: lead loops with -scale-workers cat panes each: time to bring
//     the fleet up, idle CPU of this process and of the tmux server with the
//     panes up, dispatch latency (command published → the loop's
//     "dispatched" line, after send-keys) and done latency (ack →
//     "harvested") one at a time, then every remaining plan dispatched at
//     once.
//  3. record: state.json and LEDGER.jsonl at -scale-plans plans, built in
//     memory the way a finished plan leaves them; bytes per plan, the time
//     of one Save (encode, write, fsync, rename) and of the roll-back
//     snapshot, against the save of an empty record (the fsync floor); one
//     ledger append (it reads and parses the whole file first) against the
//     same at the smallest size.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/notify"
)

var (
	scaleRates   = flag.String("scale-rates", "100,200,400,800,1600,3200", "scale section: offered rates of started events, per second, one step each")
	scaleStep    = flag.Duration("scale-step", 3*time.Second, "scale section: length of one rate step")
	scaleWorkers = flag.String("scale-workers", "8,64,256", "scale section: cat panes per lead loop, one fleet each")
	scalePlans   = flag.String("scale-plans", "100,1000,5000", "scale section: plans in the record whose save and ledger append are timed")
	scaleParts   = flag.String("scale-parts", "rate,workers,record", "scale section: which parts to run")
	scaleProfile = flag.String("scale-cpuprofile", "", "scale section: CPU profile of this process (lead loop, broker, publishers) over the rate ramp, to this file")
)

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad list %q", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuOf(ru)
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return cpuOf(ru)
}

func scale(ctx context.Context, o options, dir string) (string, error) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	parts := *scaleParts
	p("## Scale (go run ./bench -sections scale -scale-rates %s -scale-step %v -scale-workers %s -scale-plans %s -scale-parts %s)\n\n",
		*scaleRates, *scaleStep, *scaleWorkers, *scalePlans, parts)
	p("nproc %d; load average %s at the start\n\n", nproc(), loadAvg())
	if strings.Contains(parts, "rate") {
		rates, err := ints(*scaleRates)
		if err != nil {
			return "", err
		}
		if err := scaleRate(ctx, o, filepath.Join(dir, "scale-rate"), rates, *scaleStep, p); err != nil {
			return b.String(), fmt.Errorf("rate: %w", err)
		}
		p("\nload average %s after the rate ramp\n\n", loadAvg())
	}
	if strings.Contains(parts, "workers") {
		ws, err := ints(*scaleWorkers)
		if err != nil {
			return "", err
		}
		if err := scaleFleets(ctx, o, dir, ws, p); err != nil {
			return b.String(), fmt.Errorf("workers: %w", err)
		}
		p("\nload average %s after the fleets\n\n", loadAvg())
	}
	if strings.Contains(parts, "record") {
		ns, err := ints(*scalePlans)
		if err != nil {
			return "", err
		}
		if err := scaleRecord(filepath.Join(dir, "scale-record"), ns, p); err != nil {
			return b.String(), fmt.Errorf("record: %w", err)
		}
		p("\nload average %s at the end\n", loadAvg())
	}
	return b.String(), nil
}

func nproc() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// workerConn is an open connection with worker w's NKey, as orch-notify
// makes one, kept open.
func workerConn(url, orchDir, w string) (*nats.Conn, error) {
	seed, err := os.ReadFile(orchdir.WorkerKey(orchDir, w))
	if err != nil {
		return nil, err
	}
	return notify.Connect(notify.Config{URL: url, Seed: bytes.TrimSpace(seed), Inbox: event.WorkerInboxOf(w), Timeout: 3 * time.Second}, "bench-scale-"+w)
}

// backlog is the lead consumer's unhandled count (pending + delivered and
// not yet acked), read from the broker.
func backlog(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	u, err := broker.ReadUsage(ctx, js)
	return u.Unhandled, err
}

func scaleRate(ctx context.Context, o options, dir string, rates []int, step time.Duration, p func(string, ...any)) error {
	const W = 8
	names := planNames(W)
	root, err := makeRepo(ctx, dir, names)
	if err != nil {
		return err
	}
	fl, err := startFleetLead(ctx, root, fmt.Sprintf("orch-bench-%d-scale-rate", os.Getpid()), W, o.verbose)
	if err != nil {
		return err
	}
	defer fl.close()
	holder, err := fl.dispatchAll(ctx, names)
	if err != nil {
		return err
	}
	var ws, planOf []string
	conns := map[string]*nats.Conn{}
	for _, n := range names {
		w := holder[n]
		c, err := workerConn(fl.url, fl.orchDir, w)
		if err != nil {
			return err
		}
		defer c.Close()
		conns[w] = c
		ws, planOf = append(ws, w), append(planOf, n)
	}
	cfg, err := notify.LeadConfig(fl.orchDir)
	if err != nil {
		return err
	}
	lc, err := notify.Connect(cfg, "bench-scale-usage")
	if err != nil {
		return err
	}
	defer lc.Close()
	js, err := jetstream.New(lc)
	if err != nil {
		return err
	}
	statePath := filepath.Join(fl.orchDir, orchdir.State)
	if *scaleProfile != "" {
		f, err := os.Create(*scaleProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	p("### Rate: cheap events (started) into one lead loop, 8 workers, in-process publishers\n\n")
	p("| offered /s | published | publish wall s | achieved offered /s | backlog after step | handled /s in step | drain s | handled /s draining | bench CPU ms/s | state.json KiB after |\n")
	p("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, rate := range rates {
		n := int(float64(rate) * step.Seconds())
		b0, err := backlog(ctx, js)
		if err != nil {
			return err
		}
		c0 := selfCPU()
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if d := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d) // pacing the publisher to the offered rate
			}
			w := ws[i%W]
			e := event.New(event.Started, planOf[i%W], "", w, "")
			if _, _, err := notify.PublishOn(conns[w], cfg.Prefix, e, 10*time.Second); err != nil {
				return fmt.Errorf("publish at %d/s: %w", rate, err)
			}
		}
		wall := time.Since(t0)
		b1, err := backlog(ctx, js)
		if err != nil {
			return err
		}
		cpu := selfCPU() - c0
		handled := float64(int64(n)-int64(b1)+int64(b0)) / wall.Seconds()
		// Drain: read the backlog every 50 ms until it is empty (the bench
		// samples the broker's count; the loop under test does not poll).
		td := time.Now()
		left := b1
		for left > 0 {
			if time.Since(td) > 2*time.Minute {
				return fmt.Errorf("backlog of %d not drained after 2 minutes at %d/s", left, rate)
			}
			time.Sleep(50 * time.Millisecond) // the bench samples the count; the loop under test does not poll
			if left, err = backlog(ctx, js); err != nil {
				return err
			}
		}
		drain := time.Since(td)
		drainRate := "—"
		if b1 > 0 && drain > 0 {
			drainRate = fmt.Sprintf("%.0f", float64(b1)/drain.Seconds())
		}
		var kib float64
		if fi, err := os.Stat(statePath); err == nil {
			kib = float64(fi.Size()) / 1024
		}
		p("| %d | %d | %.2f | %.0f | %d | %.0f | %.2f | %s | %.0f | %.0f |\n", rate, n, wall.Seconds(), float64(n)/wall.Seconds(),
			b1, handled, drain.Seconds(), drainRate, float64(cpu)/float64(wall+drain)*1000, kib)
		logf("scale rate %d/s: backlog %d, drained in %.2f s", rate, b1, drain.Seconds())
		if float64(b1) > 0.25*float64(n) {
			p("\nStopped at %d/s: the backlog after the step was over a quarter of what it published.\n", rate)
			break
		}
	}
	return nil
}

func tmuxServerPid(socket string) int {
	out, err := exec.Command("tmux", "-L", socket, "display-message", "-p", "#{pid}").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

func scaleFleets(ctx context.Context, o options, dir string, ws []int, p func(string, ...any)) error {
	p("### Workers: cat panes per lead loop (shared isolation, in process)\n\n")
	p("| panes | fleet up s | ms per pane | idle bench CPU ms/s | idle tmux server CPU ms/s | dispatch → dispatched median / p95 ms (one at a time) | ack → harvested median / p95 ms (one at a time) | rest dispatched at once: n, s, ms each |\n")
	p("|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, W := range ws {
		names := planNames(W)
		root, err := makeRepo(ctx, filepath.Join(dir, fmt.Sprintf("scale-w%d", W)), names)
		if err != nil {
			return err
		}
		socket := fmt.Sprintf("orch-bench-%d-scale-w%d", os.Getpid(), W)
		logf("scale workers: bringing up %d cat panes", W)
		t := time.Now()
		fl, err := startFleetLead(ctx, root, socket, W, o.verbose)
		if err != nil {
			return err
		}
		up := time.Since(t)
		row, err := fleetRow(ctx, fl, socket, names, W)
		fl.close()
		if err != nil {
			return err
		}
		p("| %d | %.2f | %.1f | %s |\n", W, up.Seconds(), float64(up.Milliseconds())/float64(W), row)
	}
	return nil
}

func fleetRow(ctx context.Context, fl *fleetLead, socket string, names []string, W int) (string, error) {
	const idle = 3 * time.Second
	tp := tmuxServerPid(socket)
	var tt0, tt1 int64
	if tp > 0 {
		tt0, _, _ = cpuTicks(tp)
	}
	c0 := selfCPU()
	time.Sleep(idle) // the idle window
	ci := selfCPU() - c0
	if tp > 0 {
		tt1, _, _ = cpuTicks(tp)
	}
	cfg, err := notify.LeadConfig(fl.orchDir)
	if err != nil {
		return "", err
	}
	nc, err := notify.Connect(cfg, "bench-scale-dispatch")
	if err != nil {
		return "", err
	}
	defer nc.Close()
	k := min(W, 20)
	var disp, harv []time.Duration
	for _, n := range names[:k] {
		fl.tap.drain()
		t := time.Now()
		if _, _, err := notify.PublishOn(nc, cfg.Prefix, event.New(event.Dispatch, n, "", "", ""), 5*time.Second); err != nil {
			return "", err
		}
		r, err := fl.tap.waitFor(ctx, time.Minute, "dispatched", func(r logRec) bool {
			return r.Attrs["plan"] == n && (r.Msg == "dispatched" || r.Msg == "refused" || strings.HasPrefix(r.Msg, "dispatch failed"))
		})
		if err != nil {
			return "", err
		}
		if r.Msg != "dispatched" {
			return "", fmt.Errorf("dispatch %s: %s %v", n, r.Msg, r.Attrs)
		}
		disp = append(disp, r.At.Sub(t))
		w := r.Attrs["worker"]
		wc, err := workerConn(fl.url, fl.orchDir, w)
		if err != nil {
			return "", err
		}
		_, _, err = notify.PublishOn(wc, cfg.Prefix, event.New(event.Done, n, "ok", w, ""), 5*time.Second)
		ta := time.Now()
		if err != nil {
			wc.Close()
			return "", err
		}
		r, err = fl.tap.waitFor(ctx, time.Minute, "harvested", func(r logRec) bool { return harvestedOne(r.Msg, r.Attrs, n) })
		wc.Close()
		if err != nil {
			return "", err
		}
		harv = append(harv, r.At.Sub(ta))
	}
	rest := "—"
	if W > k {
		t := time.Now()
		if _, err := fl.dispatchAll(ctx, names[k:]); err != nil {
			return "", err
		}
		d := time.Since(t)
		rest = fmt.Sprintf("%d, %.2f, %.1f", W-k, d.Seconds(), float64(d.Milliseconds())/float64(W-k))
	}
	dd, hd := distOf(disp), distOf(harv)
	return fmt.Sprintf("%.1f | %.1f | %s / %s | %s / %s | %s",
		float64(ci.Milliseconds())/idle.Seconds(), float64(tt1-tt0)*1000/clockTick/idle.Seconds(),
		fmtMs(dd.Med), fmtMs(dd.P95), fmtMs(hd.Med), fmtMs(hd.P95), rest), nil
}

// syntheticState is a record of n plans as the loop leaves each one done:
// one attempt in its history, a harvest commit and a ledger id, and three
// handled events (the dispatch command, started, done with its callback).
func syntheticState(n int) *state.State {
	st := state.New()
	now := time.Now().UTC()
	for i := 1; i <= 8; i++ {
		st.Workers = append(st.Workers, &state.Worker{ID: fmt.Sprintf("w%d", i), State: state.WorkerIdle, Pane: fmt.Sprintf("%%%d", i), Since: now, Profile: "cat"})
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("p%04d", i)
		w := fmt.Sprintf("w%d", i%8+1)
		end := now
		done := event.NewID()
		st.Plans[name] = &state.Run{Name: name, State: state.PlanDone, Worker: w, Status: "ok",
			Result: strings.Repeat("0123456789abcdef", 2) + "01234567", Ledger: i, LedgeredAttempt: 1,
			Queued: now, AttemptSince: now, Updated: now, Attempts: 1, DoneEvent: done, DoneTime: now, Typed: true,
			Def: &state.Def{}, History: []ledger.Attempt{{N: 1, Worker: w, Profile: "cat", Start: now, End: &end, Outcome: "done"}}}
		st.Handled[event.NewID()] = &state.Handled{Kind: "dispatch", Plan: name, Time: now, Note: "queued"}
		st.Handled[event.NewID()] = &state.Handled{Kind: "started", Plan: name, Time: now, Note: "running"}
		st.Handled[done] = &state.Handled{Kind: "done", Plan: name, Time: now, Published: true, Note: "harvested",
			Callback: event.NewCallback(event.CallbackDone, done, name, w, "ok", strings.Repeat("0123456789abcdef", 2)+"01234567")}
	}
	return st
}

func medianOf(f func() error, k int) (time.Duration, error) {
	var ds []time.Duration
	for range k {
		t := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t))
	}
	return distOf(ds).Med, nil
}

func scaleRecord(dir string, ns []int, p func(string, ...any)) error {
	const k = 15
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	floor, err := medianOf(func() error { return state.New().Save(dir) }, k)
	if err != nil {
		return err
	}
	p("### Record: state.json and LEDGER.jsonl against the number of plans (%d runs each, medians)\n\n", k)
	p("Floor: saving an empty record (encode, write, fsync, rename): %s ms.\n\n", fmtMs(floor))
	p("| plans | state.json bytes | bytes per plan | Save ms | ÷ empty save | snapshot (encode) ms | LEDGER.jsonl bytes | ledger append ms (read, parse, write, fsync) | ÷ append at %d | ledger.Load ms |\n", ns[0])
	p("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var base time.Duration
	for _, n := range ns {
		st := syntheticState(n)
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		sd := filepath.Join(dir, fmt.Sprintf("n%d", n))
		if err := os.MkdirAll(sd, 0o755); err != nil {
			return err
		}
		save, err := medianOf(func() error { return st.Save(sd) }, k)
		if err != nil {
			return err
		}
		snap, err := medianOf(func() error { st.Snapshot(); return nil }, k)
		if err != nil {
			return err
		}
		es := make([]ledger.Entry, n)
		now := time.Now().UTC()
		for i := range es {
			name := fmt.Sprintf("p%04d", i+1)
			end := now
			es[i] = ledger.Entry{Plan: name, Worker: "w1", Status: "ok", Commit: strings.Repeat("0123456789abcdef", 2) + "01234567", Time: now,
				Event: event.NewID(), Profile: "cat", Attempt: 1, Attempts: []ledger.Attempt{{N: 1, Worker: "w1", Profile: "cat", Start: now, End: &end, Outcome: "done"}}}
		}
		if _, err := ledger.AppendAll(sd, es); err != nil {
			return err
		}
		i := 0
		app, err := medianOf(func() error {
			i++
			end := now
			_, err := ledger.AppendAll(sd, []ledger.Entry{{Plan: fmt.Sprintf("x%04d", i), Worker: "w1", Status: "ok", Commit: strings.Repeat("0123456789abcdef", 2) + "01234567",
				Time: now, Event: event.NewID(), Profile: "cat", Attempt: 1, Attempts: []ledger.Attempt{{N: 1, Worker: "w1", Start: now, End: &end, Outcome: "done"}}}})
			return err
		}, k)
		if err != nil {
			return err
		}
		load, err := medianOf(func() error { _, err := ledger.Load(sd); return err }, k)
		if err != nil {
			return err
		}
		lfi, err := os.Stat(filepath.Join(sd, ledger.File))
		if err != nil {
			return err
		}
		if base == 0 {
			base = app
		}
		p("| %d | %d | %d | %s | %s | %s | %d | %s | %s | %s |\n", n, len(data)+1, (len(data)+1)/n, fmtMs(save), ratio(float64(save), float64(floor)),
			fmtMs(snap), lfi.Size(), fmtMs(app), ratio(float64(app), float64(base)), fmtMs(load))
		os.RemoveAll(sd)
	}
	return nil
}
