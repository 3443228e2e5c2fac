package agent

import "errors"

// ErrNoAgent marks an empty agent name or command.
var ErrNoAgent = errors.New("no agent")

// ErrNotInstalled marks an agent whose program is not on PATH.
var ErrNotInstalled = errors.New("agent not installed")
