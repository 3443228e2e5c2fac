package lead

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
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
