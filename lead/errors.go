package lead

import "errors"

// ErrNotInitialised means the repo has no .orch/ directory.
var ErrNotInitialised = errors.New("repo not initialised for orch")

// ErrAlreadyServing means another orch serve holds the repo's lock.
var ErrAlreadyServing = errors.New("orch serve is already running for this repo")

// ErrHostWorkerDead means a host refused a run because the worker's pane
// there has died (its died may not have reached the lead yet).
var ErrHostWorkerDead = errors.New("worker's pane on its host has died")

// ErrNoFleet means a worker was addressed that has no pane.
var ErrNoFleet = errors.New("no such worker in the fleet")

// ErrConnLost means the lead loop's in-process connection to its broker
// closed; the loop stops rather than go on deaf.
var ErrConnLost = errors.New("connection to the embedded broker closed")

// ErrDetached means the repo's HEAD is on no branch: orch serve commits
// on one.
var ErrDetached = errors.New("HEAD is detached")

// ErrRebuildReadable means orch serve --rebuild was asked with a
// state.json that reads fine.
var ErrRebuildReadable = errors.New("no rebuild of a readable record")
