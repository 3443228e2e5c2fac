package gates

import "errors"

// ErrSetup is a failed setup command (orch.yaml's setup).
var ErrSetup = errors.New("setup command failed")

// ErrStopping refuses to record a process group while the Runner stops:
// the stop has killed the groups it knew, and this one would outlive it.
var ErrStopping = errors.New("the lead loop is stopping")
