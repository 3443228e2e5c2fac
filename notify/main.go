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
       orch-notify say [--plan <plan> | --topic <topic>] <text words...>
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
	what := string(e.Kind) + " " + e.Plan
	if e.Kind == event.Say {
		what = "say on " + event.SayTopic(e.Plan, e.Topic)
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify: %v\n", err)
		return exitNotKept
	}
	cfg, err := WorkerConfig(env, cwd)
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify: %s not kept: %v\n", what, err)
		return exitNotKept
	}
	res, err := Send(cfg, e)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "orch-notify: %s not kept: %v\n", what, err)
		return exitNotKept
	case res.Spooled != "":
		fmt.Fprintf(stderr, "orch-notify: broker not reachable (%v); %s spooled to %s, orch serve delivers it when it runs\n",
			res.PubErr, what, res.Spooled)
	case res.Duplicate:
		fmt.Fprintf(stderr, "orch-notify: %s was already kept (event %s)\n", what, e.ID)
	default:
		fmt.Fprintf(stderr, "orch-notify: %s kept (event %s)\n", what, e.ID)
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
	if len(args) >= 1 && args[0] == string(event.Say) {
		return parseSay(args[1:], worker, host)
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
		return event.Event{}, fmt.Errorf("%w: unknown kind %q (want started, done, blocked or say)", errUsage, args[0])
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

// parseSay reads say's arguments: a finding for the fleet, for one plan's
// topic (--plan) or for a named topic (--topic), from the worker in
// ORCH_WORKER, whose own key sends it.
func parseSay(args []string, worker, host string) (event.Event, error) {
	var plan, topic string
	for len(args) >= 2 && (args[0] == "--plan" || args[0] == "--topic") {
		if args[0] == "--plan" {
			plan = args[1]
		} else {
			topic = args[1]
		}
		args = args[2:]
	}
	switch {
	case worker == "":
		return event.Event{}, fmt.Errorf("%w: say needs ORCH_WORKER: a say goes out under its worker's id", errUsage)
	case plan != "" && topic != "":
		return event.Event{}, fmt.Errorf("%w: say takes --plan or --topic, not both", errUsage)
	case len(args) > 0 && strings.HasPrefix(args[0], "--"):
		return event.Event{}, fmt.Errorf("%w: say: unknown option %q (want --plan <plan> or --topic <topic>, then the text)", errUsage, args[0])
	case strings.TrimSpace(strings.Join(args, " ")) == "":
		return event.Event{}, fmt.Errorf("%w: say needs the text to say", errUsage)
	}
	if plan != "" {
		if err := event.CheckPlanName(plan); err != nil {
			return event.Event{}, fmt.Errorf("%w: say --plan: %v", errUsage, err)
		}
	}
	if topic != "" {
		if err := event.CheckTopic(topic); err != nil {
			return event.Event{}, fmt.Errorf("%w: say --topic: %v", errUsage, err)
		}
	}
	e := event.New(event.Say, plan, strings.Join(args, " "), worker, host)
	e.Topic = topic
	return e, nil
}
