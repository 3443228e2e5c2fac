package runas

import "errors"

// ErrUser means run_as names a user a worker cannot run as.
var ErrUser = errors.New("run_as: not a worker's user")

// ErrNotAllowed means this orch serve cannot start processes as another
// user.
var ErrNotAllowed = errors.New("run_as: not allowed here")

// ErrCannot means a worker's user cannot reach something it needs.
var ErrCannot = errors.New("run_as: the worker's user cannot reach what it needs")
