package telemetry

import "errors"

// ErrBadUsage means a Usage cannot be true: an unknown source, a negative
// count or cost.
var ErrBadUsage = errors.New("bad usage")

// ErrNotRegular means a transcript or rollout path is not a regular file
// (a FIFO, a device, a directory): it is not read.
var ErrNotRegular = errors.New("not a regular file")

// ErrNoRollout means no Codex rollout file holds the thread asked for.
var ErrNoRollout = errors.New("no Codex rollout for this thread")
