package hostd

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runner/fake"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// published is one record a pane host kept for the lead.
type published struct {
	subject string
	e       event.Event
}

// paneDaemon is a host of workers w3 and w4 in panes %5 and %6 of a tmux
// server only the strict fake answers for; what it would keep in its
// stream is collected instead.
func paneDaemon(t *testing.T) (*daemon, *fake.Runner, *[]published) {
	t.Helper()
	d := testDaemon(t)
	f := fake.New(t)
	fl, err := fleet.New(fleet.Config{Root: d.repo.Root, OrchDir: orchdir.Of(d.repo.Root), Repo: d.repo, Panes: true,
		Tmux: &tmux.Client{Socket: "t", Runner: f}, Isolation: config.Worktree, Own: d.tok.Workers, NoDeathHook: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	d.fleet = fl
	var out []published
	d.publish = func(_ context.Context, subject string, e event.Event) error {
		out = append(out, published{subject, e})
		return nil
	}
	p := d.newPanes()
	t.Cleanup(p.sessions.Close)
	p.st.Workers = []*state.Worker{{ID: "w3", State: state.WorkerIdle, Pane: "%5"}, {ID: "w4", State: state.WorkerIdle, Pane: "%6"}}
	return d, f, &out
}

func tmuxArgs(args ...string) []string { return append([]string{"-u", "-L", "t"}, args...) }

func prove(pane string) []string {
	return tmuxArgs("display-message", "-p", "-t", pane, "#{pane_id}\t#{"+tmux.WorkerOption+"}\t#{pane_dead}")
}

// A run on a pane host types the plan's dispatch line into the worker's
// pane once the pane proves to be the worker's, and answers with the
// pane. A pane that is someone else's gets nothing, and the host keeps no
// plan; a dead worker's run is refused before tmux or git is asked
// anything, saying the worker is dead (the lead queues the plan again); a
// worker whose agent is still starting gets its line once it is at its
// prompt (the session's Waiting).
func TestRunPane(t *testing.T) {
	d, f, _ := paneDaemon(t)
	line, err := fleet.DispatchLine("p", d.fleet.NotifyBin())
	if err != nil {
		t.Fatal(err)
	}
	f.Expect("tmux", prove("%5"), "%5\tw3\t0\n", nil)
	f.Expect("tmux", tmuxArgs("send-keys", "-t", "%5", "-l", "--", line), "", nil)
	f.Expect("tmux", tmuxArgs("send-keys", "-t", "%5", "Enter"), "", nil)
	r, err := d.runPane(t.Context(), hosts.Run{Worker: "w3", Plan: "p", Attempt: 2})
	if err != nil || r.Pane != "%5" {
		t.Fatalf("run: %+v %v", r, err)
	}
	st := d.panes.st
	if p := st.Plans["p"]; p == nil || p.Worker != "w3" || p.Attempts != 2 || p.State != state.PlanDispatched {
		t.Fatalf("the host's record of p: %+v", p)
	}
	if w := st.Worker("w3"); w.Plan != "p" || w.State != state.WorkerBusy {
		t.Fatalf("w3: %+v", w)
	}

	f.Expect("tmux", prove("%6"), "%6\tw9\t0\n", nil)
	if _, err := d.runPane(t.Context(), hosts.Run{Worker: "w4", Plan: "q", Attempt: 1}); !errors.Is(err, tmux.ErrNoPane) {
		t.Fatalf("a run into a pane that is not w4's: %v", err)
	}
	if st.Plans["q"] != nil || st.Worker("w4").Plan != "" || st.Worker("w4").State != state.WorkerIdle {
		t.Fatalf("a run that typed nothing left %+v %+v", st.Plans["q"], st.Worker("w4"))
	}

	st.Worker("w4").State, st.Worker("w4").Reason = state.WorkerDead, "pane %6 exited"
	req, _ := json.Marshal(hosts.Run{Worker: "w4", Plan: "q", Attempt: 1, Base: strings.Repeat("a", 40), PlanMD: []byte("# q\n")})
	if r := d.answer(hosts.OpsSubject("orch", "alpha", hosts.OpRun), req); !r.Dead || !strings.Contains(r.Error, "w4's pane %6 has died") {
		t.Fatalf("a run on a dead worker: %+v", r)
	}

	w := st.Worker("w4")
	w.State, w.Starting = state.WorkerBusy, true
	f.Expect("tmux", prove("%6"), "%6\tw4\t0\n", nil)
	if r, err := d.runPane(t.Context(), hosts.Run{Worker: "w4", Plan: "q", Attempt: 1}); err != nil || r.Pane != "%6" {
		t.Fatalf("a run on a starting worker: %+v %v", r, err)
	}
	if p := st.Plans["q"]; p == nil || !p.Waiting {
		t.Fatalf("q on a starting worker: %+v, want it waiting for the prompt", p)
	}
}

// orch read of a pane worker is its pane's screen (its last lines when
// asked); a worker with no pane here falls back to the headless log.
func TestPaneScreen(t *testing.T) {
	d, f, _ := paneDaemon(t)
	f.Expect("tmux", tmuxArgs("capture-pane", "-p", "-J", "-t", "%5"), "one\ntwo\nthree\n\n", nil)
	r, pane, err := d.screen(t.Context(), hosts.Log{Worker: "w3", Lines: 2})
	if err != nil || !pane || r.Pane != "%5" || r.Text != "two\nthree\n" {
		t.Fatalf("screen: %+v %v %v", r, pane, err)
	}
	if _, pane, err := d.screen(t.Context(), hosts.Log{Worker: "w7"}); pane || err != nil {
		t.Fatalf("a worker with no pane here: %v %v", pane, err)
	}
}

// A pane's death goes to the lead once, as died about the worker, naming
// the pane, under the worker's subject; the worker is dead on the host
// and its plan forgotten. A report about a pane the worker no longer has
// is dropped.
func TestPaneDied(t *testing.T) {
	d, _, out := paneDaemon(t)
	st := d.panes.st
	st.Plans["p"] = &state.Run{Name: "p", Worker: "w3", State: state.PlanRunning, Attempts: 1}
	st.Worker("w3").Plan = "p"
	d.died(t.Context(), fleet.Death{Worker: "w3", Pane: "%5", PID: 77})
	d.died(t.Context(), fleet.Death{Worker: "w3", Pane: "%5", PID: 77})
	d.died(t.Context(), fleet.Death{Worker: "w4", Pane: "%2", PID: 78})
	if len(*out) != 1 {
		t.Fatalf("published %+v, want one died", *out)
	}
	got := (*out)[0]
	if got.subject != "orch.ev.w3.died" || got.e.Kind != event.Died || got.e.Worker != "w3" || got.e.Pane != "%5" || got.e.Plan != "" ||
		!strings.Contains(got.e.Status, "pane %5 exited (process 77) on host alpha") {
		t.Fatalf("died: %s %+v", got.subject, got.e)
	}
	if err := got.e.Check(); err != nil {
		t.Fatalf("died event the lead would refuse: %v", err)
	}
	if w := st.Worker("w3"); w.State != state.WorkerDead || w.Plan != "" || st.Plans["p"] != nil {
		t.Fatalf("after the death: %+v, plan %+v", w, st.Plans["p"])
	}
	if st.Worker("w4").State != state.WorkerIdle {
		t.Fatal("another pane's report killed w4")
	}
}

// What the sessions would tell the lead reaches it as an event about the
// worker's plan: a dialog while its plan waits (the callback names the
// worker) as needs-input, an unacknowledged dispatch (put in the outbox)
// as failed. A dialog while no plan waits stays on the host.
func TestTellPassesPlanEvents(t *testing.T) {
	d, _, out := paneDaemon(t)
	st := d.panes.st
	st.Worker("w3").Plan = "p"
	d.tell(event.NewCallback(event.CallbackNeedsInput, "asks-w3-1", "w3", "w3", "Trust this folder?", ""))
	d.tell(event.NewCallback(event.CallbackNeedsInput, "asks-w4-1", "w4", "w4", "Pick a theme", ""))
	st.Outbox = append(st.Outbox, event.NewCallback(event.CallbackFailed, "ack-p-1", "p", "w3", "no started after dispatch and one re-send", ""))
	d.tell(nil)
	d.tell(event.NewCallback(event.CallbackDied, "x", "p", "w3", "gone", ""))
	if len(*out) != 2 || len(st.Outbox) != 0 {
		t.Fatalf("published %+v, outbox %v", *out, st.Outbox)
	}
	ni, failed := (*out)[0], (*out)[1]
	if ni.subject != "orch.ev.w3.needs-input" || ni.e.Kind != event.NeedsInput || ni.e.Plan != "p" || ni.e.Status != "Trust this folder?" {
		t.Fatalf("needs-input: %s %+v", ni.subject, ni.e)
	}
	if failed.subject != "orch.ev.w3.failed" || failed.e.Kind != event.Failed || failed.e.Plan != "p" {
		t.Fatalf("failed: %s %+v", failed.subject, failed.e)
	}
	for _, p := range *out {
		if err := p.e.Check(); err != nil {
			t.Fatalf("%s: an event the lead would refuse: %v", p.e.Kind, err)
		}
	}
}

// The host follows its workers' events on its own server: started moves
// the plan it typed on, its end frees the worker; an event about a plan
// the worker does not hold changes nothing.
func TestHeardMovesRecord(t *testing.T) {
	d, _, _ := paneDaemon(t)
	st := d.panes.st
	st.Plans["p"] = &state.Run{Name: "p", Worker: "w3", State: state.PlanDispatched, Attempts: 1}
	w := st.Worker("w3")
	w.Plan, w.State = "p", state.WorkerBusy
	d.heard(t.Context(), event.New(event.Started, "other", "", "w3", "alpha"))
	if st.Plans["p"].State != state.PlanDispatched {
		t.Fatal("another plan's started moved p")
	}
	d.heard(t.Context(), event.New(event.Started, "p", "", "w3", "alpha"))
	if st.Plans["p"].State != state.PlanRunning {
		t.Fatalf("p after started: %s", st.Plans["p"].State)
	}
	d.heard(t.Context(), event.New(event.Done, "p", "ok", "w4", "alpha"))
	if st.Plans["p"] == nil {
		t.Fatal("w4's done ended w3's plan")
	}
	d.heard(t.Context(), event.New(event.Done, "p", "ok", "w3", "alpha"))
	if st.Plans["p"] != nil || w.Plan != "" || w.State != state.WorkerIdle {
		t.Fatalf("after done: %+v %+v", st.Plans["p"], w)
	}
}
