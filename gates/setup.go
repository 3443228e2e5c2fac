package gates

import (
	"fmt"
	"strings"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/runas"
)

// Setup runs orch.yaml's setup command in a checkout, with ORCH_PLAN and
// ORCH_WORKER set: it knows which plan (and worker) it prepares for.
// track, when set, records its process group like a gate's (killed when
// the lead loop stops); Runner.Track is one. as, when set, is the worker's
// user it runs as.
func Setup(conf *config.Config, dir, plan, worker string, as *runas.User, track func(pgid int, running bool) error) error {
	if conf.Setup == "" {
		return nil
	}
	setup := "ORCH_PLAN=" + fleet.ShellQuote(plan) + " ORCH_WORKER=" + fleet.ShellQuote(worker) + "; export ORCH_PLAN ORCH_WORKER; " + conf.Setup
	r := RunTracked(dir, setup, time.Duration(conf.SetupTimeout), as, track)
	if !r.Failed() {
		return nil
	}
	how := fmt.Sprintf("exit %d", r.Exit)
	switch {
	case r.TimedOut:
		how = "timed out after " + time.Duration(conf.SetupTimeout).String()
	case r.Err != "":
		how = r.Err
	}
	// The captured output keeps line ends as \n escapes.
	out := strings.TrimSpace(strings.ReplaceAll(r.Stderr, `\n`, "\n"))
	if out == "" {
		out = strings.TrimSpace(strings.ReplaceAll(r.Stdout, `\n`, "\n"))
	}
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:] // the last line says most
	}
	if out != "" {
		how += ": " + out
	}
	return fmt.Errorf("%w: %q: %s", ErrSetup, conf.Setup, how)
}
