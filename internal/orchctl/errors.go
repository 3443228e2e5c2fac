package orchctl

import "errors"

// ErrNoFleet means a worker was addressed that the fleet does not have, or
// one with no pane to read or type into.
var ErrNoFleet = errors.New("no such worker in the fleet")

// ErrNotServing means no orch serve is running for the repo.
var ErrNotServing = errors.New("orch serve is not running for this repo (start it with orch serve)")

// ErrNotDelivered means orch wait could not write the callback out; it
// was given back to the lead loop for the next orch wait.
var ErrNotDelivered = errors.New("callback not written")

// ErrTimeout means orch wait saw no callback in time.
var ErrTimeout = errors.New("no callback")

// ErrBadRounds means a verification was asked for with other than 1 or 3 rounds.
var ErrBadRounds = errors.New("bad number of rounds")

// ErrNotVerified means a plan has no verification to report.
var ErrNotVerified = errors.New("plan has not been put to verification")

// ErrRefused means the lead loop refused a command; the error carries its
// reason.
var ErrRefused = errors.New("refused by the lead loop")

// ErrNotTaken means orch ack named a callback that was not handed over to
// the lead agent, or was acknowledged already.
var ErrNotTaken = errors.New("no such callback handed over and not yet acknowledged")

// ErrEmptyText means orch send was given nothing to type.
var ErrEmptyText = errors.New("nothing to send")

// ErrPaneTyping means orch lead uninstall pane was asked while an orch
// serve --lead-pane types from the pane's inbox.
var ErrPaneTyping = errors.New("orch serve --lead-pane is typing from this inbox")
