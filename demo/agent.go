// Package demo is orch demo and the scripted agent it runs: a real process
// in a real tmux pane that reads the dispatch line from its terminal the way
// an agent would, follows the "agent:" lines of the plan, writes RESULT.md
// and calls orch-notify. Tests use the same agent, and the plan text can tell
// it to misbehave (block, skip RESULT.md, notify twice, die, ignore an
// interrupt). An interrupt (SIGINT) stops the plan at work, as Escape stops
// a real agent's turn.
package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/plans"
)

var dispatchRe = regexp.MustCompile(`Read plans/([a-z0-9][a-z0-9._-]{0,62})/PLAN\.md`)

// Agent reads lines from in until it ends; every dispatch line starts a
// plan, executed in dir. notify runs orch-notify.
type Agent struct {
	Dir    string
	In     io.Reader
	Out    io.Writer
	Runner runner.Runner
	// Interrupts, when set, delivers the agent's interrupts (SIGINT: a
	// Ctrl-C in its pane, or the lead loop's at a plan's timeout). Like a
	// real agent's Escape, one stops the plan at work and the agent goes
	// back to reading lines.
	Interrupts <-chan os.Signal
}

// Run serves dispatch lines until in is closed or ctx is done.
func (a *Agent) Run(ctx context.Context) error {
	fmt.Fprintf(a.Out, "scripted agent %s ready in %s\n", os.Getenv("ORCH_WORKER"), a.Dir)
	sc := bufio.NewScanner(a.In)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		m := dispatchRe.FindStringSubmatch(sc.Text())
		if m == nil {
			fmt.Fprintf(a.Out, "(not a dispatch line, ignored)\n")
			continue
		}
		if exit := a.plan(ctx, m[1]); exit {
			return nil
		}
	}
	return sc.Err()
}

// directives are what a plan's "agent:" lines ask for.
type directives struct {
	sleep     time.Duration
	status    string
	block     string
	noResult  bool
	doneTwice bool
	exit      bool
	noStart   bool
	stubborn  bool // interrupts do not stop its sleep
	// contextFull names a marker file: while it is not there, the agent
	// makes it, says it ran out of context as Claude Code's PreCompact
	// hook does, and works no further (a fresh session finds it and works).
	// "-" is no marker: every session runs out.
	contextFull string
	writes      [][2]string
	claims      []string
}

func parseDirectives(body string) directives {
	d := directives{}
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "agent:")
		if !ok {
			continue
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(rest), " ")
		arg = strings.TrimSpace(arg)
		switch verb {
		case "sleep":
			d.sleep, _ = time.ParseDuration(arg)
		case "status":
			d.status = arg
		case "block":
			d.block = arg
		case "no-result":
			d.noResult = true
		case "done-twice":
			d.doneTwice = true
		case "exit":
			d.exit = true
		case "no-start":
			d.noStart = true
		case "stubborn":
			d.stubborn = true
		case "context-full":
			d.contextFull = arg
		case "claim":
			d.claims = append(d.claims, arg)
		case "write":
			path, text, _ := strings.Cut(arg, " ")
			d.writes = append(d.writes, [2]string{path, text})
		}
	}
	return d
}

// plan executes one plan; it reports whether the agent should exit.
func (a *Agent) plan(ctx context.Context, name string) bool {
	for len(a.Interrupts) > 0 {
		<-a.Interrupts // one that came while no plan was at work stops nothing
	}
	fmt.Fprintf(a.Out, "→ plan %s\n", name)
	if !a.start(ctx, name) {
		return false
	}
	p, err := plans.Load(a.Dir, name)
	if err != nil {
		a.notify(ctx, "blocked", name, "cannot read plan: "+err.Error())
		return false
	}
	if strings.Contains(p.Body, "# Verify the claims of ") {
		a.verify(ctx, name, p.Body)
		return false
	}
	d := parseDirectives(p.Body)
	if d.exit {
		fmt.Fprintf(a.Out, "  exiting mid-plan, as the plan says\n")
		return true
	}
	if d.contextFull != "" && a.outOfContext(ctx, name, d.contextFull) {
		return true
	}
	if d.sleep > 0 {
		fmt.Fprintf(a.Out, "  working for %s\n", d.sleep)
		t := time.NewTimer(d.sleep) // simulated work, one timer
		interrupts := a.Interrupts
		if d.stubborn {
			interrupts = nil
		}
		select {
		case <-t.C:
		case <-interrupts:
			t.Stop()
			fmt.Fprintf(a.Out, "  interrupted: plan %s stopped\n", name)
			return false
		case <-ctx.Done():
			t.Stop()
			return true
		}
	}
	for _, w := range d.writes {
		path := filepath.Join(a.Dir, filepath.FromSlash(w[0]))
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(w[1]+"\n"), 0o644); err != nil {
			a.notify(ctx, "blocked", name, "write "+w[0]+": "+err.Error())
			return false
		}
		fmt.Fprintf(a.Out, "  wrote %s\n", w[0])
	}
	if d.block != "" {
		a.notify(ctx, "blocked", name, d.block)
		return false
	}
	status := d.status
	if status == "" {
		status = "done: " + name
	}
	if !d.noResult {
		var b strings.Builder
		fmt.Fprintf(&b, "# Result: %s\n\n%s\n", name, status)
		if len(d.claims) > 0 {
			b.WriteString("\n## Claims\n")
			for i, c := range d.claims {
				fmt.Fprintf(&b, "%d. %s\n", i+1, c)
			}
		}
		if err := os.WriteFile(plans.ResultPath(a.Dir, name), []byte(b.String()), 0o644); err != nil {
			a.notify(ctx, "blocked", name, "write RESULT.md: "+err.Error())
			return false
		}
		fmt.Fprintf(a.Out, "  wrote %s\n", plans.RelResultPath(name))
	}
	a.notify(ctx, "done", name, status)
	if d.doneTwice {
		a.notify(ctx, "done", name, status)
	}
	return false
}

// outOfContext plays an agent whose context fills up, the first time
// (marker not there; "-": every time): it makes marker, runs its hook as Claude Code runs
// PreCompact when it starts compacting on its own, and then waits for ctx
// (orch replaces the session). It says whether it did.
func (a *Agent) outOfContext(ctx context.Context, name, marker string) bool {
	if marker != "-" {
		if !filepath.IsAbs(marker) {
			marker = filepath.Join(a.Dir, marker)
		}
		if _, err := os.Stat(marker); err == nil {
			return false
		}
		if err := os.WriteFile(marker, []byte(name+"\n"), 0o644); err != nil {
			fmt.Fprintf(a.Out, "  context-full marker: %v\n", err)
			return false
		}
	}
	fmt.Fprintf(a.Out, "  context full: compacting\n")
	in := fmt.Sprintf(`{"hook_event_name":"PreCompact","trigger":"auto","cwd":%q}`, a.Dir)
	if _, err := a.Runner.Run(ctx, runner.Cmd{Name: "orch-notify", Args: []string{"hook", "claude"}, Dir: a.Dir, Stdin: []byte(in)}); err != nil {
		fmt.Fprintf(a.Out, "  orch-notify hook claude failed: %v\n", err)
	}
	<-ctx.Done() // the session is replaced: its pane or process is killed
	return true
}

// start sends "started" unless the plan says not to; it reads the plan
// only for that directive.
func (a *Agent) start(ctx context.Context, name string) bool {
	if p, err := plans.Load(a.Dir, name); err == nil && parseDirectives(p.Body).noStart {
		return true
	}
	a.notify(ctx, "started", name, "")
	return true
}

func (a *Agent) notify(ctx context.Context, kind, name, text string) {
	args := []string{kind, name}
	if text != "" {
		args = append(args, text)
	}
	out, err := a.Runner.Run(ctx, runner.Cmd{Name: "orch-notify", Args: args, Dir: a.Dir})
	if err != nil {
		fmt.Fprintf(a.Out, "  orch-notify %s %s failed: %v\n", kind, name, err)
		return
	}
	fmt.Fprintf(a.Out, "  orch-notify %s %s ok%s\n", kind, name, strings.TrimSpace(string(out)))
}

var backticked = regexp.MustCompile("`([^`]+)`")

// verify plays a verifier: each claim that names a command in backquotes is
// checked by running it (exit 0 confirms it); a claim with nothing to run
// is unverifiable. The verdicts go to RESULT.md in the strict format.
func (a *Agent) verify(ctx context.Context, name, brief string) {
	claims, err := plans.Claims([]byte(brief))
	if err != nil {
		a.notify(ctx, "blocked", name, "no claims in the brief: "+err.Error())
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Verdicts for %s\n\n## Verdicts\n", name)
	confirmed := 0
	for i, c := range claims {
		m := backticked.FindStringSubmatch(c)
		if m == nil {
			fmt.Fprintf(&b, "%d. UNVERIFIABLE: the claim names no command to run\n", i+1)
			continue
		}
		_, err := a.Runner.Run(ctx, runner.Cmd{Name: "sh", Args: []string{"-c", m[1]}, Dir: a.Dir})
		if err != nil {
			fmt.Fprintf(&b, "%d. REFUTED: ran `%s`: %s\n", i+1, m[1], strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		confirmed++
		fmt.Fprintf(&b, "%d. CONFIRMED: ran `%s`: exit 0\n", i+1, m[1])
	}
	fmt.Fprintf(a.Out, "  verified %d claims, %d confirmed\n", len(claims), confirmed)
	if err := os.WriteFile(plans.ResultPath(a.Dir, name), []byte(b.String()), 0o644); err != nil {
		a.notify(ctx, "blocked", name, "write RESULT.md: "+err.Error())
		return
	}
	a.notify(ctx, "done", name, fmt.Sprintf("%d of %d claims confirmed", confirmed, len(claims)))
}
