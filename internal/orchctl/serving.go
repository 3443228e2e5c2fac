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

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// DispatchResult says how a dispatch command was kept.
type DispatchResult struct {
	Plan    string `json:"plan"`
	Event   string `json:"event"`
	Spooled bool   `json:"spooled"`
}

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

// SendCommand hands a lead command to the lead loop through the stream, or
// spools it when orch serve is not running: it takes effect when it starts.
func SendCommand(root string, e event.Event) (DispatchResult, error) {
	res := DispatchResult{Plan: e.Plan, Event: e.ID}
	od := orchdir.Of(root)
	cfg, err := notify.LeadConfig(od)
	if err != nil || !Serving(root) {
		cfg = notify.Config{SpoolDir: filepath.Join(od, orchdir.Spool)}
	}
	kept, err := notify.Send(cfg, e)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", e.Kind, e.Plan, err)
	}
	res.Spooled = kept.Spooled != ""
	return res, nil
}
