package orchctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/notify"
)

// HostAdded is what orch hosts add tells: the entry, and the line to run
// on the host (holding its secret token).
type HostAdded struct {
	Host hosts.Host `json:"host"`
	// Leaf is the lead's leaf URL when orch serve runs with --leaf, else
	// "" (the line then says where it goes).
	Leaf  string `json:"leaf"`
	Token string `json:"token"`
}

// JoinLine is the command to run on the host.
func (a HostAdded) JoinLine() string {
	leaf := a.Leaf
	if leaf == "" {
		leaf = "nats-leaf://LEAD-ADDR:PORT"
	}
	return fmt.Sprintf("orch host join %s --token %s", leaf, a.Token)
}

// HostsAdd registers a host with n workers. A running lead loop lets it
// in at once (it follows the register).
func HostsAdd(root, name string, n int) (HostAdded, error) {
	od := orchdir.Of(root)
	prefix := event.DefaultPrefix
	ep, epErr := orchdir.ReadEndpoint(od, event.DefaultPrefix)
	if epErr == nil {
		prefix = ep.Prefix
	}
	h, tok, err := hosts.Add(od, name, n, hosts.Taken(od), prefix)
	if err != nil {
		return HostAdded{}, err
	}
	a := HostAdded{Host: h, Token: tok}
	if Serving(root) && epErr == nil {
		a.Leaf = ep.Leaf
	}
	return a, nil
}

// HostsRemove deletes a host's entry; a running lead loop revokes its key
// and cuts its link at once.
func HostsRemove(root, name string) (hosts.Host, error) {
	return hosts.Remove(orchdir.Of(root), name)
}

// HostView is a host in orch status: its entry, and its link as the
// running lead loop sees it (nil: the loop is not running, or did not
// answer; Note says which).
type HostView struct {
	hosts.Host
	Link *broker.Link `json:"link,omitempty"`
	Note string       `json:"note,omitempty"`
}

// Hosts lists the registered hosts with their links.
func Hosts(root string) ([]HostView, error) {
	od := orchdir.Of(root)
	hs, err := hosts.List(od)
	if err != nil || len(hs) == 0 {
		return nil, err
	}
	links, lerr := askLinks(root)
	var out []HostView
	for _, h := range hs {
		v := HostView{Host: h}
		switch {
		case lerr != nil:
			v.Note = lerr.Error()
		default:
			v.Note = "not linked yet (the lead loop has not taken it in)"
			for i := range links {
				if links[i].Host == h.Name {
					v.Link, v.Note = &links[i], ""
				}
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// errNotServing says there is no lead loop to ask.
var errNotServing = errors.New("lead loop not running: link unknown")

func askLinks(root string) ([]broker.Link, error) {
	od := orchdir.Of(root)
	if !Serving(root) {
		return nil, errNotServing
	}
	cfg, err := notify.LeadConfig(od)
	if err != nil {
		return nil, err
	}
	nc, err := notify.Connect(cfg, "orch-status")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	m, err := nc.Request(broker.LinksSubject(cfg.Prefix), nil, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("the lead loop did not say how its links stand: %w", err)
	}
	var links []broker.Link
	if err := json.Unmarshal(m.Data, &links); err != nil {
		var e struct{ Error string }
		json.Unmarshal(m.Data, &e)
		return nil, fmt.Errorf("the lead loop could not read its links: %s", e.Error)
	}
	return links, nil
}

// maxSkew is the clock difference orch doctor warns about: past it, the
// times of a host's events (attempt starts and ends, stats) mislead.
const maxSkew = 2 * time.Second

// hostChecks are orch doctor's lines about hosts. On the lead: each
// registered host's link and clock, as the running loop sees them. In a
// host's clone (orch host runs there): the git remote the lead's commits
// come from.
func hostChecks(ctx context.Context, root string, run runner.Runner) []Check {
	od := orchdir.Of(root)
	var out []Check
	if pid, held := flock.Holder(filepath.Join(od, orchdir.HostLock)); held {
		c := Check{Name: "host's git remote", Info: fmt.Sprintf("orch host runs here (pid %d)", pid)}
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if _, err := run.Run(ctx, runner.Cmd{Name: "git", Args: []string{"ls-remote", "--exit-code", "origin", "HEAD"}, Dir: root}); err != nil {
			c.Info += ": origin not reachable: " + strings.TrimSpace(err.Error())
			c.Fix = "the lead's plans start from commits fetched from this clone's origin: make git fetch origin work (or give orch host join --remote NAME)"
		} else {
			c.OK, c.Info = true, c.Info+": origin answers"
		}
		out = append(out, c)
	}
	hs, err := Hosts(root)
	if err != nil {
		return append(out, Check{Name: "hosts", Info: err.Error(), Fix: "fix or remove the entry named (orch hosts remove NAME)"})
	}
	for _, h := range hs {
		c := Check{Name: "host " + h.Name, Info: "workers " + strings.Join(h.Workers, ",")}
		switch l := h.Link; {
		case l == nil:
			c.Info += ": " + h.Note
			c.Fix = "start orch serve --leaf ADDR:PORT, and orch host join on " + h.Name
		case !l.Up:
			c.Info += ": link down"
			if l.Error != "" {
				c.Info += " (" + l.Error + ")"
			}
			c.Fix = "on " + h.Name + ": is orch host join running, and does it reach the --leaf address? (its log says)"
		case l.SkewKnown && (l.Skew > maxSkew || l.Skew < -maxSkew):
			c.Info += fmt.Sprintf(": link up, but its clock is %v off the lead's", l.Skew.Round(time.Millisecond))
			c.Fix = "sync " + h.Name + "'s clock (NTP): event times, attempt durations and stats depend on it"
		default:
			c.OK = true
			c.Info += ": link up"
			if l.SkewKnown {
				c.Info += fmt.Sprintf(", clock within %v", l.Skew.Abs().Round(time.Millisecond))
			}
		}
		out = append(out, c)
	}
	return out
}

// remoteOf is the host that runs worker id, as the lead loop's record
// says; "" for the lead's own (or an unknown) worker.
func remoteOf(root, id string) string {
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return ""
	}
	if w := st.Worker(id); w != nil {
		return w.Remote
	}
	return ""
}

// readRemote asks worker id's host for its screen: its pane's (a host
// joined with --tmux), or the output of its last headless run.
func readRemote(root, host, id string, lines int) (string, error) {
	if !Serving(root) {
		return "", fmt.Errorf("read %s: %w: %s runs on host %s, reached through the lead loop", id, ErrNotServing, id, host)
	}
	cfg, err := notify.LeadConfig(orchdir.Of(root))
	if err != nil {
		return "", err
	}
	cfg.Inbox = hosts.ReplyPrefix(cfg.Prefix, host) // the host may answer only there
	nc, err := notify.Connect(cfg, "orch-read")
	if err != nil {
		return "", err
	}
	defer nc.Close()
	data, _ := json.Marshal(hosts.Log{Worker: id, Lines: lines})
	m, err := nc.Request(hosts.OpsSubject(cfg.Prefix, host, hosts.OpLog), data, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("read %s: host %s did not answer: %w", id, host, err)
	}
	var r hosts.Reply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return "", fmt.Errorf("read %s: host %s: unreadable reply: %w", id, host, err)
	}
	if r.Error != "" {
		return "", fmt.Errorf("read %s: host %s: %s", id, host, r.Error)
	}
	if r.Pane != "" {
		return fmt.Sprintf("(%s on host %s, pane %s: its screen)\n%s", id, host, r.Pane, r.Text), nil
	}
	return fmt.Sprintf("(%s on host %s, headless: the output of its last run, %s)\n%s", id, host, r.Name, r.Text), nil
}
