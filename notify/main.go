package notify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/orch-dev/orch/event"
)

const usage = `usage: orch-notify started <plan>
       orch-notify done    <plan> <status words...>
       orch-notify blocked <plan> <reason words...>
       orch-notify hook claude          (an agent hook: JSON on stdin; always exits 0)
       orch-notify hook codex <json>`

// Exit codes.
const (
	exitKept    = 0
	exitNotKept = 1
	exitUsage   = 2
)

// Main is orch-notify: it parses args, sends the event and returns the exit
// code. The command's main only calls it, so tests can run it in-process.
func Main(args []string, env Env, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "hook" {
		return Hook(args[1:], env, os.Stdin, stderr)
	}
	e, err := parseArgs(args, env)
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify: %v\n%s\n", err, usage)
		return exitUsage
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify: %v\n", err)
		return exitNotKept
	}
	cfg, err := WorkerConfig(env, cwd)
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify: %s %s not kept: %v\n", e.Kind, e.Plan, err)
		return exitNotKept
	}
	res, err := Send(cfg, e)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "orch-notify: %s %s not kept: %v\n", e.Kind, e.Plan, err)
		return exitNotKept
	case res.Spooled != "":
		fmt.Fprintf(stderr, "orch-notify: broker not reachable (%v); %s %s spooled to %s, orch serve delivers it when it runs\n",
			res.PubErr, e.Kind, e.Plan, res.Spooled)
	case res.Duplicate:
		fmt.Fprintf(stderr, "orch-notify: %s %s was already kept (event %s)\n", e.Kind, e.Plan, e.ID)
	default:
		fmt.Fprintf(stderr, "orch-notify: %s %s kept (event %s)\n", e.Kind, e.Plan, e.ID)
	}
	return exitKept
}

// errUsage marks bad command-line arguments (exit 2).
var errUsage = errors.New("bad arguments")

func parseArgs(args []string, env Env) (event.Event, error) {
	worker := env("ORCH_WORKER")
	if worker != "" && !event.ValidWorker(worker) {
		return event.Event{}, fmt.Errorf("%w: ORCH_WORKER=%q is not a worker id like w1", errUsage, worker)
	}
	host, _ := os.Hostname()
	if len(args) >= 1 && args[0] == string(event.Died) {
		// Sent by the pane-died hook (or a supervisor) for the worker in
		// ORCH_WORKER; ORCH_PANE names the pane that ended.
		if worker == "" {
			return event.Event{}, fmt.Errorf("%w: died needs ORCH_WORKER", errUsage)
		}
		e := event.New(event.Died, "", strings.Join(args[1:], " "), worker, host)
		e.Pane = env("ORCH_PANE")
		return e, nil
	}
	if len(args) < 2 {
		return event.Event{}, fmt.Errorf("%w: need a kind and a plan name", errUsage)
	}
	kind := event.Kind(args[0])
	switch kind {
	case event.Started:
		if len(args) > 2 {
			return event.Event{}, fmt.Errorf("%w: started takes only the plan name", errUsage)
		}
	case event.Done, event.Blocked:
		if len(args) < 3 || strings.TrimSpace(strings.Join(args[2:], " ")) == "" {
			return event.Event{}, fmt.Errorf("%w: %s needs a one-line %s after the plan name", errUsage, kind, map[event.Kind]string{event.Done: "status", event.Blocked: "reason"}[kind])
		}
	default:
		return event.Event{}, fmt.Errorf("%w: unknown kind %q (want started, done or blocked)", errUsage, args[0])
	}
	plan := args[1]
	if err := event.CheckPlanName(plan); err != nil {
		return event.Event{}, err
	}
	var status string
	if len(args) > 2 {
		status = strings.Join(args[2:], " ")
	}
	return event.New(kind, plan, status, worker, host), nil
}
