package lead

import "errors"

// ErrNotInitialised means the repo has no .orch/ directory.
var ErrNotInitialised = errors.New("repo not initialised for orch")

// ErrAlreadyServing means another orch serve holds the repo's lock.
var ErrAlreadyServing = errors.New("orch serve is already running for this repo")

// ErrNoFleet means a worker was addressed that has no pane.
var ErrNoFleet = errors.New("no such worker in the fleet")

// ErrNotServing means no orch serve is running for the repo.
var ErrNotServing = errors.New("orch serve is not running for this repo (start it with orch serve)")

// ErrTimeout means orch wait saw no callback in time.
var ErrTimeout = errors.New("no callback")

// ErrConnLost means the lead loop's in-process connection to its broker
// closed; the loop stops rather than go on deaf.
var ErrConnLost = errors.New("connection to the embedded broker closed")

// ErrBadRounds means a verification was asked for with other than 1 or 3 rounds.
var ErrBadRounds = errors.New("bad number of rounds")

// ErrNotVerified means a plan has no verification to report.
var ErrNotVerified = errors.New("plan has not been put to verification")
