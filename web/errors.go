package web

import "errors"

// ErrNotLoopback means the board was asked to listen on an address other
// than a loopback one: the page shows the whole fleet and takes no
// password but its token, so it never leaves the machine.
var ErrNotLoopback = errors.New("the web board listens on loopback only")

// ErrClosed means the server was closed before it was given frames.
var ErrClosed = errors.New("web board closed")
