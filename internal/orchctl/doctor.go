package orchctl

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/notify"
)

// Check is one line of orch doctor.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Info string `json:"info,omitempty"`
	Fix  string `json:"fix,omitempty"`
	// Optional checks (agent profiles this machine may not need) do not
	// make orch doctor fail.
	Optional bool `json:"optional,omitempty"`
}

// DoctorConfig is what orch doctor checks, and what it checks with.
type DoctorConfig struct {
	Root string // the repo; empty outside one
	// Agent, if set, is what orch serve --agent would be given (a profile
	// name or a command).
	Agent  string
	BinDir string        // the directory orch runs from; an orch-notify there counts
	Probe  time.Duration // bounds each agent profile's version command
	Runner runner.Runner // runs tmux and git; nil means the OS
}

// Doctor checks what orch needs on this machine and in this repo, and says
// how to fix what is missing. Every agent profile is probed too.
func Doctor(ctx context.Context, dc DoctorConfig) []Check {
	var out []Check
	add := func(c Check) { out = append(out, c) }
	run, root := dc.Runner, dc.Root
	if run == nil {
		run = runner.OS{}
	}

	add(tmuxCheck(ctx, run))
	add(gitCheck(ctx, run))
	notifyPath, err := exec.LookPath("orch-notify")
	switch {
	case err == nil:
		add(Check{Name: "orch-notify", OK: true, Info: notifyPath})
	case dc.BinDir != "" && isExec(filepath.Join(dc.BinDir, "orch-notify")):
		notifyPath = filepath.Join(dc.BinDir, "orch-notify")
		add(Check{Name: "orch-notify", OK: true, Info: notifyPath + " (next to orch; orch serve puts it on the workers' PATH)"})
	default:
		notifyPath = ""
		add(Check{Name: "orch-notify", Fix: "build it next to orch: " + BuildCommand + " (or CGO_ENABLED=0 go install ./cmd/...)"})
	}
	if notifyPath != "" {
		add(notifyLinkCheck(notifyPath))
	}
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		add(Check{Name: "pidfd", Info: err.Error(), Fix: "Linux 5.3 or later is needed to notice worker deaths from the process itself; the tmux hook still works"})
	} else {
		unix.Close(fd)
		add(Check{Name: "pidfd", OK: true})
	}
	if dc.Agent != "" {
		add(agentCheck(root, dc.Agent))
		if c, ok := asksCheck(root, dc.Agent); ok {
			add(c)
		}
	}
	out = append(out, ProbeAgents(ctx, root, dc.Probe)...)
	if root == "" {
		add(Check{Name: "repo", Fix: "run orch inside a git repository"})
		return out
	}
	od := orchdir.Of(root)
	if fi, err := os.Stat(od); err != nil || !fi.IsDir() {
		add(Check{Name: "repo", Info: root, Fix: "run orch init"})
		return out
	}
	add(Check{Name: "repo", OK: true, Info: root})
	out = append(out, hostChecks(ctx, root, run)...)
	keys := []string{filepath.Join(od, orchdir.Creds, orchdir.LeadCreds)}
	workerKeys, _ := filepath.Glob(filepath.Join(od, orchdir.Creds, orchdir.WorkerKeys, "*.nk"))
	for _, p := range append(keys, workerKeys...) {
		name := "credentials " + filepath.Base(p)
		if p != keys[0] {
			name = "credentials " + orchdir.WorkerKeys + "/" + filepath.Base(p)
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			add(Check{Name: name, Fix: "run orch init (or orch serve) to create it"})
		case fi.Mode().Perm()&0o077 != 0:
			add(Check{Name: name, Info: fmt.Sprintf("mode %o", fi.Mode().Perm()), Fix: "chmod 600 " + p})
		default:
			add(Check{Name: name, OK: true, Info: "mode 600"})
		}
	}
	pid := ServePID(root)
	if pid == 0 {
		add(Check{Name: "lead loop", Info: "not running", Fix: "start it with orch serve (events are spooled meanwhile)"})
		return out
	}
	cfg, err := notify.LeadConfig(od)
	var nc *nats.Conn
	if err == nil {
		nc, err = notify.Connect(cfg, "orch-doctor")
	}
	if err != nil {
		add(Check{Name: "lead loop", Info: fmt.Sprintf("pid %d, broker not reachable: %v", pid, err), Fix: "restart it: orch down, then orch serve"})
		return out
	}
	defer nc.Close()
	add(Check{Name: "lead loop", OK: true, Info: fmt.Sprintf("pid %d, broker %s", pid, cfg.URL)})
	if c, ok := externalCheck(ctx, root); ok {
		add(c)
	}
	add(streamCheck(ctx, nc))
	return out
}

// streamCheck says how full the event stream is: when it is full, every
// new event is refused.
func streamCheck(ctx context.Context, nc *nats.Conn) Check {
	c := Check{Name: "event stream"}
	js, err := jetstream.New(nc)
	if err != nil {
		c.Info = err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u, err := broker.ReadUsage(ctx, js)
	if err != nil {
		c.Info, c.Fix = err.Error(), "restart the lead loop: orch down, then orch serve"
		return c
	}
	c.OK, c.Info = !u.Alarm(), u.String()
	if u.Alarm() {
		c.Fix = u.Fix()
	}
	return c
}

// tmuxCheck asks tmux for its version: 3.0 or later has the pane options
// and hooks the fleet needs.
func tmuxCheck(ctx context.Context, run runner.Runner) Check {
	v, err := run.Run(ctx, runner.Cmd{Name: "tmux", Args: []string{"-V"}})
	if err != nil {
		return Check{Name: "tmux", Fix: "install tmux 3.0 or later (Debian/Ubuntu: sudo apt-get install -y tmux; macOS: brew install tmux)"}
	}
	ver := strings.TrimSpace(string(v))
	ok := !strings.HasPrefix(ver, "tmux 1.") && !strings.HasPrefix(ver, "tmux 2.")
	c := Check{Name: "tmux", OK: ok, Info: ver}
	if !ok {
		c.Fix = "upgrade tmux to 3.0 or later (pane options and hooks are needed)"
	}
	return c
}

// gitCheck asks git for its version.
func gitCheck(ctx context.Context, run runner.Runner) Check {
	v, err := run.Run(ctx, runner.Cmd{Name: "git", Args: []string{"--version"}})
	if err != nil {
		return Check{Name: "git", Fix: "install git (Debian/Ubuntu: sudo apt-get install -y git)"}
	}
	return Check{Name: "git", OK: true, Info: strings.TrimSpace(string(v))}
}

// BuildCommand is how the README builds orch and orch-notify.
const BuildCommand = "CGO_ENABLED=0 go build -o bin/ ./cmd/..."

// notifyLinkCheck warns when the orch-notify workers will run (path)
// needs the dynamic loader (built with cgo on, Go's default where a C
// compiler is installed): every callback then waits for ld.so before Go
// starts (BENCHMARKS.md, start-up section). Optional: it works, only slower.
func notifyLinkCheck(path string) Check {
	c := Check{Name: "orch-notify build", Optional: true}
	dyn, err := DynamicallyLinked(path)
	switch {
	case err != nil:
		c.Info = err.Error()
	case dyn:
		c.Info = path + " is dynamically linked: every callback first waits for the dynamic loader"
		c.Fix = "rebuild it static, from the orch source: CGO_ENABLED=0 go build -o " + filepath.Dir(path) + "/ ./cmd/orch-notify"
	default:
		c.OK, c.Info = true, "static"
	}
	return c
}

// DynamicallyLinked says whether the ELF executable at path names a
// program interpreter (the dynamic loader).
func DynamicallyLinked(path string) (bool, error) {
	f, err := elf.Open(path)
	var fe *elf.FormatError
	if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return false, fmt.Errorf("%s is not an ELF executable (%v)", path, err)
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
