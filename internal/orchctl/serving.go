// Package orchctl is the CLI's side of orch serve: what orch status,
// dispatch, wait, down and doctor do, talking to a running lead loop
// through its broker and its files, never by importing the daemon.
//
// How the pieces fit. serving.go finds the loop (the pid holding the serve
// lock) and hands it commands, through the stream or the spool when it is
// down. client.go writes what the lead owns in git (init, plans, the
// ledger), under the lock that serialises orch's commits, and sends
// dispatch and verify as commands; wait takes callbacks off the broker.
// status.go reads the loop's record and the plan folders, reads and types
// into panes, and down stops the loop and then its fleet. doctor.go checks
// the machine and the repo. Nothing here writes the loop's state file: the
// loop stays its only writer.
package orchctl

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// DispatchResult says how a command (dispatch, verify) was kept, and what
// the lead loop made of it.
type DispatchResult struct {
	Plan    string `json:"plan"`
	Event   string `json:"event"`
	Spooled bool   `json:"spooled"`
	// Answered says the lead loop's verdict came in time; Note is it
	// ("queued", or the reason of a refusal, which is also the error).
	Answered bool   `json:"answered"`
	Refused  bool   `json:"refused,omitempty"`
	Note     string `json:"note,omitempty"`
}

// DefaultVerdictWait is how long orch dispatch and orch verify wait for
// the lead loop's verdict on a command it has stored.
const DefaultVerdictWait = 30 * time.Second

// Serving reports whether an orch serve holds the repo's lock, and its pid.
func Serving(root string) bool {
	_, held := flock.Holder(filepath.Join(orchdir.Of(root), orchdir.ServePID))
	return held
}

// ServePID returns the pid of the running orch serve, 0 if none.
func ServePID(root string) int {
	pid, held := flock.Holder(filepath.Join(orchdir.Of(root), orchdir.ServePID))
	if !held {
		return 0
	}
	return pid
}

// SendCommand hands e to the lead loop: stored in the stream when orch
// serve runs (then it waits up to wait for the loop's verdict), else
// spooled for its start. A refusal is an error wrapping ErrRefused, with
// the loop's reason; no verdict in time is no error (the command is kept,
// and takes effect when the loop reaches it): Answered says which.
func SendCommand(root string, e event.Event, wait time.Duration) (DispatchResult, error) {
	res := DispatchResult{Plan: e.Plan, Event: e.ID}
	od := orchdir.Of(root)
	spool, err := notify.LeadSpoolConfig(od)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", e.Kind, e.Plan, err)
	}
	cfg, err := notify.LeadConfig(od)
	if err != nil || !Serving(root) {
		return spoolCommand(res, spool, e)
	}
	nc, err := notify.Connect(cfg, "orch-"+string(e.Kind))
	if err != nil {
		return spoolCommand(res, spool, e)
	}
	defer nc.Close()
	var sub *nats.Subscription
	if wait > 0 {
		// Subscribed before the command is out, so the answer cannot pass by.
		if sub, err = nc.SubscribeSync(event.VerdictSubject(cfg.Prefix, e.ID)); err != nil {
			return res, fmt.Errorf("%s %s: %w", e.Kind, e.Plan, err)
		}
	}
	if _, _, err := notify.PublishOn(nc, cfg.Prefix, e, cfg.Timeout); err != nil {
		// The lead went away meanwhile: the spool keeps it (a copy that
		// did get in is dropped by its id).
		return spoolCommand(res, spool, e)
	}
	if sub == nil {
		return res, nil
	}
	m, err := sub.NextMsg(wait)
	if err != nil {
		return res, nil // kept; the loop has not got to it yet
	}
	v, err := event.ParseVerdict(m.Data)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", e.Kind, e.Plan, err)
	}
	res.Answered, res.Refused, res.Note = true, v.Refused, v.Note
	if v.Refused {
		return res, fmt.Errorf("%s %s: %w: %s", e.Kind, e.Plan, ErrRefused, strings.TrimPrefix(v.Note, "refused: "))
	}
	return res, nil
}

func spoolCommand(res DispatchResult, cfg notify.Config, e event.Event) (DispatchResult, error) {
	kept, err := notify.Send(cfg, e)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", e.Kind, e.Plan, err)
	}
	res.Spooled = kept.Spooled != ""
	return res, nil
}
