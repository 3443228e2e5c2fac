package config

import "errors"

// ErrInvalid marks an orch.yaml that cannot be used.
var ErrInvalid = errors.New("invalid " + File)

// ErrWorkers marks a fleet (--workers, orch.yaml's workers:) that cannot
// be read.
var ErrWorkers = errors.New("bad workers")
