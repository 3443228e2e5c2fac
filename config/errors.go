package config

import "errors"

// ErrInvalid marks an orch.yaml that cannot be used.
var ErrInvalid = errors.New("invalid " + File)
