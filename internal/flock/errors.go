package flock

import "errors"

// ErrHeld means another process holds the lock.
var ErrHeld = errors.New("lock held by another process")
