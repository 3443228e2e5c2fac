package hostd

import "errors"

// ErrBusy means this clone already runs an orch host, or the lead's orch
// serve.
var ErrBusy = errors.New("this clone is in use")

// ErrRequest means a request from the lead is not one this host takes.
var ErrRequest = errors.New("bad request")

// ErrBase means a plan's base commit cannot be had on this host.
var ErrBase = errors.New("base commit not here")
