package lead

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/state"
)

// hostMsg is a delivery with the source header the lead's server writes
// on a message sourced from a host's stream.
type hostMsg struct {
	msg
	source string
}

func (m *hostMsg) Headers() nats.Header {
	if m.source == "" {
		return nil
	}
	return nats.Header{"Nats-Stream-Source": {m.source}}
}

// A host speaks for its own workers only, sends no commands, and its
// workers speak only through it; a removed host is not heard.
func TestHostRefusal(t *testing.T) {
	l, _ := testLoop(t)
	l.hosts = []hosts.Host{{Name: "alpha", Workers: []string{"w3", "w4"}}, {Name: "beta", Workers: []string{"w5"}}}
	from := func(host string) string {
		if host == "" {
			return ""
		}
		return "HOST_" + host + ":Tk9KDuqL 12 > > orch.ev.w3.done"
	}
	for _, c := range []struct {
		name, host, worker string
		kind               event.Kind
		refused            string
	}{
		{"host's own worker", "alpha", "w3", event.Done, ""},
		{"lead's own worker, here", "", "w1", event.Done, ""},
		{"another host's worker", "alpha", "w5", event.Done, "runs w3,w4, but names worker w5"},
		{"the lead's worker through a host", "beta", "w1", event.Started, "runs w5, but names worker w1"},
		{"a host's worker not through it", "", "w3", event.Done, "runs on host alpha, and this did not come from there"},
		{"a command from a host", "alpha", "", event.Dispatch, "sent a dispatch command"},
		{"the lead's command naming a host's worker", "", "w3", event.Dispatch, ""},
		{"a host's record of its worker's exit", "alpha", "w4", event.Exited, ""},
		{"a host's record of its worker's pane death", "alpha", "w4", event.Died, ""},
		{"a removed host", "gamma", "w3", event.Done, "host gamma, which is not registered"},
		{"not a host's stream", "OTHER", "w3", event.Done, "not a host's"},
	} {
		src := from(c.host)
		if c.host == "OTHER" {
			src = "OTHER:x 1 > > orch.ev.w3.done"
		}
		e := event.New(c.kind, "p", "ok", c.worker, "")
		got := l.hostRefusal(&hostMsg{source: src}, e)
		switch {
		case c.refused == "" && got != "":
			t.Errorf("%s: refused: %s", c.name, got)
		case c.refused != "" && !strings.Contains(got, c.refused):
			t.Errorf("%s: got %q, want a refusal saying %q", c.name, got, c.refused)
		}
	}
}

// A host's pane worker's died (its host's record; its workers' keys may
// not send one there) is taken without asking this machine's tmux, whose
// pane ids are not the host's: the worker is dead and its plan goes out
// again. One naming another pane is not about this worker's.
func TestRemotePaneDied(t *testing.T) {
	l, _ := testLoop(t)
	w := l.st.Worker("w1")
	w.Remote, w.Host, w.Pane = "alpha", "alpha", "%5"
	other := event.New(event.Died, "", "pane %1 exited (process 9) on host alpha", "w1", "alpha")
	other.Pane = "%1"
	if _, note := l.died(other); !strings.Contains(note.Text, "not w1's pane %5") {
		t.Fatalf("a died about another pane: %v", note)
	}
	e := event.New(event.Died, "", "pane %5 exited (process 9) on host alpha", "w1", "alpha")
	e.Pane = "%5"
	cb, _ := l.died(e)
	if w.State != state.WorkerDead || !strings.Contains(w.Reason, "on host alpha") || cb == nil || cb.Kind != event.CallbackDied {
		t.Fatalf("worker %+v, callback %+v", w, cb)
	}
	if p := l.st.Plans["p"]; p.State != state.PlanQueued || p.Worker != "" {
		t.Fatalf("plan after its worker's pane died: %+v", p)
	}
}

// A host's pane worker whose pane died before the lead ran anything on
// it (its agent never started) has no pane in the lead's record: its
// host's died is taken, and the worker is out of use.
func TestRemotePaneDiedBeforeAnyRun(t *testing.T) {
	l, _ := testLoop(t)
	w := l.st.Worker("w2")
	w.Remote, w.Host, w.Pane, w.Headless = "alpha", "alpha", "", true
	e := event.New(event.Died, "", "pane %7 exited (process 9) on host alpha", "w2", "alpha")
	e.Pane = "%7"
	if cb, _ := l.died(e); w.State != state.WorkerDead || cb == nil || cb.Kind != event.CallbackDied {
		t.Fatalf("worker %+v, callback %+v", w, cb)
	}
}

// A host that refuses a run because the worker's pane there has died
// typed nothing: the plan is queued again with its attempt given back,
// not failed, and the worker is out of use (not as unreachable, which a
// new link would undo).
func TestRemoteRunOnDeadPane(t *testing.T) {
	l, _ := testLoop(t)
	err := replyErr("alpha", hosts.Reply{Error: "w1's pane %5 has died (pane %5 exited)", Dead: true})
	if !errors.Is(err, ErrHostWorkerDead) {
		t.Fatalf("a dead pane's refusal: %v", err)
	}
	if err := replyErr("alpha", hosts.Reply{Error: "commit not on remote"}); err == nil || errors.Is(err, ErrHostWorkerDead) {
		t.Fatalf("another refusal: %v", err)
	}
	p, w := l.st.Plans["p"], l.st.Worker("w1")
	w.Remote, w.Host = "alpha", "alpha"
	l.remoteStartFailed(&handoff{p: p, w: w}, err)
	if p.State != state.PlanQueued || p.Worker != "" || p.Attempts != 0 {
		t.Fatalf("plan after a run refused on a dead pane: %+v", p)
	}
	if w.State != state.WorkerDead || w.Plan != "" || strings.HasPrefix(w.Reason, unreachable) || !strings.Contains(w.Reason, "has died") {
		t.Fatalf("worker after a run refused on a dead pane: %+v", w)
	}
	if len(l.st.Outbox) != 0 {
		t.Fatalf("a plan queued again told as failed: %+v", l.st.Outbox)
	}
}
