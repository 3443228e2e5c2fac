package orchctl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/orchdir"
)

// DefaultProbeTimeout bounds each agent's version command in orch doctor.
const DefaultProbeTimeout = 5 * time.Second

// ProbeAgents checks every agent profile (the built-ins and orch.yaml's)
// for real: is its program on PATH, and does its version command answer
// within timeout. Each is a Check named "agent <name>"; they are Optional
// (a machine needs only the agents it runs), except that a broken orch.yaml
// is a failure. Probes run side by side, so the wait is one timeout at most.
func ProbeAgents(ctx context.Context, root string, timeout time.Duration) []Check {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	cfg := config.Default()
	var out []Check
	if root != "" {
		c, err := config.Load(root)
		if err != nil {
			out = append(out, Check{Name: config.File, Info: strings.Join(strings.Fields(err.Error()), " "), Fix: "fix " + config.File + " at the repo root"})
		} else {
			cfg = c
		}
	}
	profiles := agent.Profiles(cfg)
	checks := make([]Check, len(profiles))
	var wg sync.WaitGroup
	for i, p := range profiles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checks[i] = probeAgent(ctx, p, timeout)
		}()
	}
	wg.Wait()
	return append(out, checks...)
}

func probeAgent(ctx context.Context, p agent.Profile, timeout time.Duration) Check {
	c := Check{Name: "agent " + p.Name, Optional: true}
	path, err := p.Check()
	if err != nil {
		c.Info, c.Fix = "not usable", err.Error()
		return c
	}
	if p.Version == "" {
		c.OK, c.Info = true, path+" (no version command to probe)"
		return c
	}
	ver, err := runVersion(ctx, p.Version, timeout)
	if err != nil {
		c.Info = path + ": " + err.Error()
		c.Fix = fmt.Sprintf("run %s yourself to see what is wrong; or set agents.%s.version in %s", p.Version, p.Name, config.File)
		return c
	}
	c.OK, c.Info = true, path+" ("+ver+")"
	return c
}

// maxVersionOutput bounds what is kept of a version command's output.
const maxVersionOutput = 4096

// runVersion runs a version command through sh in its own process group
// and returns the first line it printed. When timeout passes the whole
// group is killed: an agent that starts children must not outlive the probe.
func runVersion(ctx context.Context, command string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild that escaped the group could hold the pipe open; stop
	// waiting for it shortly after the kill.
	cmd.WaitDelay = time.Second
	var buf bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &buf, n: maxVersionOutput}
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("%s did not answer within %s (killed)", command, timeout)
	}
	first := firstLine(buf.String())
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s exited %d: %s", command, ee.ExitCode(), first)
		}
		return "", fmt.Errorf("%s: %v", command, err)
	}
	if first == "" {
		first = "answered"
	}
	return first, nil
}

func firstLine(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			return event.OneLine(l)
		}
	}
	return ""
}

// limitedWriter keeps the first n bytes and drops the rest (without
// failing the writer, which would kill the probed program with SIGPIPE).
type limitedWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// agentCheck is orch doctor --agent: would orch serve accept it?
func agentCheck(root, spec string) Check {
	cfg := config.Default()
	if root != "" {
		if c, err := config.Load(root); err == nil {
			cfg = c
		}
	}
	p, err := agent.Resolve(spec, cfg)
	if err != nil {
		return Check{Name: "agent", Info: spec, Fix: err.Error()}
	}
	path, err := p.Check()
	if err != nil {
		return Check{Name: "agent", Info: spec + " (" + p.Label() + ")", Fix: err.Error()}
	}
	return Check{Name: "agent", OK: true, Info: path + " (" + p.Label() + ")"}
}

// asksCheck says what a worker of spec will be asked (agent.Profile.Asks).
func asksCheck(root, spec string) (Check, bool) {
	cfg := config.Default()
	if root != "" {
		if c, err := config.Load(root); err == nil {
			cfg = c
		}
	}
	p, err := agent.Resolve(spec, cfg)
	if err != nil {
		return Check{}, false
	}
	dir := root
	if cfg.Isolation == config.Worktree {
		dir = fleet.WorktreeDir(root, "w1")
	}
	info, problem := p.Asks(agent.WorkerSpec{OrchDir: orchdir.Of(root), Root: root, Dir: dir, ID: "w1", Permissions: cfg.Permissions})
	return Check{Name: "agent asks", OK: problem == "", Info: info, Fix: problem}, true
}
