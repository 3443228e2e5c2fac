package watch

import "errors"

// ErrNoTerminal means orch watch was run without a terminal on stdin and
// stdout (in a pipe, a script, a CI log).
var ErrNoTerminal = errors.New("orch watch draws a live board and needs a terminal on stdin and stdout; for a snapshot in a pipe or a script, run orch status (or orch status --json)")
