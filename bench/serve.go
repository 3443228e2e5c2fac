package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// serveIsolation is passed to orch serve as --isolation when set (worktree
// or shared); empty leaves orch.yaml's, else worktree.
var serveIsolation = flag.String("serve-isolation", "", "serve section: orch serve --isolation (worktree or shared); empty: orch.yaml's, else worktree")

// serveWorkers is orch serve's --workers in the serve section.
var serveWorkers = flag.Int("serve-workers", 8, "serve section: orch serve --workers (cat panes)")

// cpuTicks reads utime+stime of pid itself and cutime+cstime of its
// waited-for children from /proc/<pid>/stat, in clock ticks.
func cpuTicks(pid int) (self, children int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (in parentheses): utime is field 14,
	// stime 15, cutime 16, cstime 17.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var v [4]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(f[11+i], 10, 64)
	}
	return v[0] + v[1], v[2] + v[3], nil
}

// bareServer is the hidden mode -bare-server <dir>: the broker orch serve
// embeds (broker.Start: nats-server, JetStream, the one stream and its two
// consumers) and nothing else, until stdin is closed. It is the baseline of
// the idle cost.
func bareServer(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := broker.EnsureCreds(dir, benchWorker); err != nil {
		return err
	}
	b, err := broker.Start(context.Background(), broker.Config{Dir: dir, Workers: []string{benchWorker}})
	if err != nil {
		return err
	}
	defer b.Shutdown()
	fmt.Printf("ready %s\n", b.URL())
	// Blocks in read(2) until the bench closes the pipe: no wakeups.
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// bareProc is this binary running as -bare-server: the broker as orch
// serve configures it, alone in its own process.
type bareProc struct {
	cmd *exec.Cmd
	in  io.Closer
	url string
}

// startBare starts a bare broker on dir and returns once it is ready.
// ctx's end kills it.
func startBare(ctx context.Context, dir string) (*bareProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-bare-server", dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		in.Close()
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	bp := &bareProc{cmd: cmd, in: in}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		bp.stop()
		return nil, fmt.Errorf("bare server: %q %v", line, err)
	}
	bp.url = strings.TrimSpace(strings.TrimPrefix(line, "ready "))
	return bp, nil
}

// stop closes the bare broker's stdin, which ends it, and reaps it.
func (bp *bareProc) stop() {
	bp.in.Close()
	bp.cmd.Wait()
}

// logLine is one line of orch serve's log, parsed.
type logLine struct {
	Msg   string
	Attrs map[string]string
	At    time.Time // when the bench read it
}

var attrRe = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// parseLogLine reads logfmt.LineHandler's format: "15:04:05.000 [LEVEL ]msg k=v ...".
func parseLogLine(s string) logLine {
	l := logLine{Attrs: map[string]string{}, At: time.Now()}
	_, rest, _ := strings.Cut(s, " ")
	for _, lvl := range []string{"WARN ", "ERROR "} {
		rest = strings.TrimPrefix(rest, lvl)
	}
	i := len(rest)
	if loc := attrRe.FindStringIndex(rest); loc != nil {
		i = loc[0]
	}
	l.Msg = strings.TrimSpace(rest[:i])
	for _, m := range attrRe.FindAllStringSubmatch(rest[i:], -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		l.Attrs[m[1]] = v
	}
	return l
}

type serveResult struct {
	Workers     int
	Settle      time.Duration
	Serve, Bare idleCost
	Plans       int
	PlansWall   time.Duration
	After       procSample // orch serve right after the last harvest
	Harvested   int
	Refused     int
}

// serveBench runs orch serve as a real process beside a bare broker: both
// idle for o.idle, then o.plans plans through orch serve's fleet.
func serveBench(ctx context.Context, o options, root, dir string) (serveResult, error) {
	res := serveResult{Workers: max(1, *serveWorkers), Plans: o.plans, Settle: 2 * time.Second}
	bin := filepath.Join(dir, "serve-bin")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./cmd/orch", "./cmd/orch-notify")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the README builds them
	if out, err := build.CombinedOutput(); err != nil {
		return res, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/orch ./cmd/orch-notify: %v\n%s", err, out)
	}
	repo := filepath.Join(dir, "serve")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return res, err
	}
	env := append(cleanEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ORCH_TMUX_SOCKET="+fmt.Sprintf("orch-bench-%d-serve", os.Getpid()))
	initCmd := exec.CommandContext(ctx, filepath.Join(bin, "orch"), "init")
	initCmd.Dir, initCmd.Env = repo, env
	if out, err := initCmd.CombinedOutput(); err != nil {
		return res, fmt.Errorf("orch init: %v\n%s", err, out)
	}
	names := planNames(o.plans)
	if _, err := makeRepo(ctx, repo, names); err != nil {
		return res, err
	}
	orchDir := filepath.Join(repo, orchdir.Name)

	bare, err := startBare(ctx, filepath.Join(dir, "bare"))
	if err != nil {
		return res, err
	}
	defer bare.stop()

	serveArgs := []string{"serve", "--workers", strconv.Itoa(res.Workers), "--agent", "cat"}
	if *serveIsolation != "" {
		serveArgs = append(serveArgs, "--isolation", *serveIsolation)
	}
	serve := exec.Command(filepath.Join(bin, "orch"), serveArgs...)
	serve.Dir, serve.Env = repo, env
	serveErr, err := serve.StderrPipe()
	if err != nil {
		return res, err
	}
	if err := serve.Start(); err != nil {
		return res, err
	}
	lines := make(chan logLine, 4096)
	go func() {
		sc := bufio.NewScanner(serveErr)
		for sc.Scan() {
			l := parseLogLine(sc.Text())
			if o.verbose {
				fmt.Fprintln(os.Stderr, "serve:", sc.Text())
			}
			lines <- l
		}
		close(lines)
	}()
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		for range lines {
		}
		serve.Wait()
		killTmux(fmt.Sprintf("orch-bench-%d-serve", os.Getpid()))
	}()
	if _, err := waitLine(ctx, lines, 30*time.Second, func(l logLine) bool { return l.Msg == "lead loop ready" }); err != nil {
		return res, fmt.Errorf("orch serve: %w", err)
	}

	// One timer: let both settle after start-up (the first GC cycles, the
	// broker's first store flush) before the idle window opens.
	time.Sleep(res.Settle) // a fixed pause before measuring, not a poll
	sp0, err := sampleProc(serve.Process.Pid)
	if err != nil {
		return res, err
	}
	bp0, err := sampleProc(bare.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	logf("idle: orch serve (%d cat workers) and the bare broker, side by side for %v", res.Workers, o.idle)
	// The measurement window itself: one timer, nothing polled meanwhile.
	time.Sleep(o.idle) // the idle window, not a poll
	sp1, err := sampleProc(serve.Process.Pid)
	if err != nil {
		return res, err
	}
	bp1, err := sampleProc(bare.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.Serve, res.Bare = costBetween(sp0, sp1), costBetween(bp0, bp1)

	// Memory after plans: keep a few dispatched ahead of the 8 workers,
	// play each worker's last step when orch serve logs its dispatch.
	logf("memory: %d plans through orch serve's %d workers", o.plans, res.Workers)
	cfg, err := notify.LeadConfig(orchDir)
	if err != nil {
		return res, err
	}
	nc, err := notify.Connect(cfg, "bench-dispatch")
	if err != nil {
		return res, err
	}
	defer nc.Close()
	ep, err := notify.ReadEndpoint(orchDir)
	if err != nil {
		return res, err
	}
	notifyBin := filepath.Join(bin, "orch-notify")
	done := make(chan error, 64)
	next := 0
	dispatch := func() error {
		if next >= len(names) {
			return nil
		}
		n := names[next]
		next++
		_, _, err := notify.PublishOn(nc, cfg.Prefix, event.New(event.Dispatch, n, "", "", ""), 5*time.Second)
		return err
	}
	cpu0, cpuKids0, err := cpuTicks(serve.Process.Pid)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	logf("plans: start %d (unix ns), orch serve pid %d, %s", t0.UnixNano(), serve.Process.Pid, orchDir)
	for range 2 * res.Workers {
		if err := dispatch(); err != nil {
			return res, err
		}
	}
	deadline := time.NewTimer(10 * time.Minute) // a deadline for a stuck loop, not a poll
	defer deadline.Stop()
	for res.Harvested < len(names) {
		select {
		case l, ok := <-lines:
			if !ok {
				return res, errors.New("orch serve exited")
			}
			switch {
			case l.Msg == "dispatched":
				go func(plan, worker string) {
					cmd := exec.Command(notifyBin, "done", plan, "ok")
					cmd.Dir = repo
					cmd.Env = workerEnv(ep.URL, orchDir, worker, ep.Prefix)
					out, err := cmd.CombinedOutput()
					if err != nil || strings.Contains(string(out), "spool") {
						err = fmt.Errorf("orch-notify done %s: %v %s", plan, err, strings.TrimSpace(string(out)))
					}
					done <- err
				}(l.Attrs["plan"], l.Attrs["worker"])
			case len(harvestedPlans(l.Msg, l.Attrs)) > 0:
				// One line per plan, or one line for a batch of them.
				for range harvestedPlans(l.Msg, l.Attrs) {
					res.Harvested++
					if err := dispatch(); err != nil {
						return res, err
					}
					if res.Harvested%250 == 0 {
						logf("memory: %d/%d harvested", res.Harvested, len(names))
					}
				}
			case l.Msg == "refused" || strings.HasPrefix(l.Msg, "done without") || strings.HasPrefix(l.Msg, "dispatch failed"):
				res.Refused++
				logf("memory: orch serve said %s %v", l.Msg, l.Attrs)
			}
		case err := <-done:
			if err != nil {
				return res, err
			}
		case <-deadline.C:
			return res, fmt.Errorf("memory: %d of %d plans harvested after 10 minutes", res.Harvested, len(names))
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	cpu1, cpuKids1, err := cpuTicks(serve.Process.Pid)
	if err != nil {
		return res, err
	}
	res.PlansWall = time.Since(t0)
	logf("plans: end %d (unix ns)", time.Now().UnixNano())
	if res.After, err = sampleProc(serve.Process.Pid); err != nil {
		return res, err
	}
	perPlan := func(ticks int64) float64 { return float64(ticks) * 1000 / clockTick / float64(len(names)) }
	logf("plans: %d in %.1f s; orch serve CPU (utime+stime, /proc/%d/stat) %d ticks = %.1f ms per plan; "+
		"its waited-for children (cutime+cstime: git and the like) %d ticks = %.1f ms per plan",
		len(names), res.PlansWall.Seconds(), serve.Process.Pid, cpu1-cpu0, perPlan(cpu1-cpu0), cpuKids1-cpuKids0, perPlan(cpuKids1-cpuKids0))
	return res, nil
}

func waitLine(ctx context.Context, lines chan logLine, timeout time.Duration, match func(logLine) bool) (logLine, error) {
	t := time.NewTimer(timeout) // a deadline, not a poll
	defer t.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return l, errors.New("exited")
			}
			if match(l) {
				return l, nil
			}
		case <-t.C:
			return logLine{}, fmt.Errorf("nothing within %v", timeout)
		case <-ctx.Done():
			return logLine{}, ctx.Err()
		}
	}
}
