package notify

import "errors"

// ErrNoRepo means no .orch/ directory was found from the working directory.
var ErrNoRepo = errors.New("not inside an orch repo")

// ErrNoBroker means the broker could not be reached or answered nothing.
var ErrNoBroker = errors.New("broker unreachable")

// ErrNoCreds means the role's credentials are missing or unreadable.
var ErrNoCreds = errors.New("no credentials")

// ErrRejected means the broker answered and refused the event.
var ErrRejected = errors.New("broker refused the event")

// ErrRefusedCreds means the broker refused the role's credential: the
// event is not spooled (the worker must be given its right credential).
var ErrRefusedCreds = errors.New("the broker refused this worker's credential")
