package hosts

import "errors"

// ErrName means a host name is not one orch can use.
var ErrName = errors.New("invalid host name")

// ErrExists means a host of that name is registered already.
var ErrExists = errors.New("host already added")

// ErrUnknown means no host of that name is registered.
var ErrUnknown = errors.New("no such host")

// ErrToken means a join token is not one orch hosts add printed.
var ErrToken = errors.New("invalid join token")

// ErrWorker means a worker id cannot go to a host.
var ErrWorker = errors.New("invalid host worker")
